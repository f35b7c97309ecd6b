//! Windows cut from a host recording for the kernels' tests.

use cubecl::client::Client;
use dspk_core::ChunkSchedule;
use dspk_ops::{DeviceArray, DeviceWindow};

/// The window `index` of `schedule` over the `channels x total` row-major recording `data`: its
/// read range uploaded, and the host copy of that range.
pub(crate) fn cut_window(
    client: &Client,
    data: &[f32],
    channels: usize,
    schedule: &ChunkSchedule,
    index: usize,
) -> (DeviceWindow, Vec<f32>) {
    let total = data.len() / channels;
    let halo_window = schedule.window(index).unwrap();
    let read = halo_window.read();
    let host: Vec<f32> = (0..channels)
        .flat_map(|c| &data[c * total + read.start as usize..c * total + read.end as usize])
        .copied()
        .collect();
    let array = DeviceArray::from_host(client, &host, channels, halo_window.read_len()).unwrap();
    (DeviceWindow::new(array, halo_window).unwrap(), host)
}

/// A window of `channels x samples` zeros, uploaded, that owns all its samples.
pub(crate) fn zero_window(client: &Client, channels: usize, samples: usize) -> DeviceWindow {
    let data = vec![0.0f32; channels * samples];
    let array = DeviceArray::from_host(client, &data, channels, samples).unwrap();
    let total = samples as u64;
    let halo_window = ChunkSchedule::new(total, total, 0, 0)
        .unwrap()
        .window(0)
        .unwrap();
    DeviceWindow::new(array, halo_window).unwrap()
}
