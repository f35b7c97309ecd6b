//! NWB ElectricalSeries recordings, in HDF5 files and NWB-Zarr stores.
