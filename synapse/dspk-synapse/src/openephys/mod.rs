//! Open Ephys binary recordings (`structure.oebin` + `continuous.dat`).
