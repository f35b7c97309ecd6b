//! Device memory stays flat over many windows. Alone in its test binary: the device's memory
//! report covers every client user in the process, so no other test may run beside it.

use cubecl::MemoryScope;
use cubecl::client::Client;
use dspk_core::SampleFormat;
use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_ops::PipelineWorkspace;

fn reserved(client: &Client) -> u64 {
    client
        .memory_report(MemoryScope::Device)
        .usage()
        .bytes_reserved
}

#[test]
fn device_allocations_do_not_grow_with_windows() {
    for_each_runtime(|target, client| {
        let (channels, samples) = (4, 999);
        let mut workspace = PipelineWorkspace::new(client, channels, samples).unwrap();
        workspace.set_stored_scaling(&[1.0; 4], &[0.0; 4]).unwrap();
        let allocations = workspace.device_allocations();
        let mut rng = Rng::new(5);
        // Seven window lengths in rotation (a recording's last window is shorter): the first
        // round lets the runtime size its upload staging for each.
        let mut after_warm_up = 0;
        for window in 0..70 {
            let n = samples - window % 7;
            let bytes: Vec<u8> = (0..channels * n * 2)
                .map(|_| rng.next_u64() as u8)
                .collect();
            workspace
                .process_stored(
                    cubecl::bytes::Bytes::from_bytes_vec(bytes),
                    SampleFormat::I16,
                    n,
                )
                .unwrap();
            workspace.sync().unwrap();
            if window == 6 {
                after_warm_up = reserved(client);
            }
        }
        assert_eq!(
            workspace.device_allocations(),
            allocations + 1,
            "on {target}: one stored buffer, then nothing more"
        );
        assert_eq!(
            workspace.device_allocations(),
            4,
            "output, gains, offsets, stored"
        );
        assert!(
            reserved(client) <= after_warm_up,
            "on {target}: device memory reserved grew from {after_warm_up} to {} over 63 windows",
            reserved(client)
        );
    });
}
