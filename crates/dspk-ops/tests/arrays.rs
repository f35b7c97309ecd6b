//! Typed device arrays are checked once, where they are made: a buffer too small for the shape
//! or the element type, host values of the wrong count, a front view larger than the array or
//! a window whose length disagrees with its array are refused with both shapes in the error.

use dspk_core::test_util::for_each_runtime;
use dspk_core::{ChunkSchedule, SampleFormat};
use dspk_ops::{ChannelVector, DeviceArray, DeviceWindow, Error, Shape, StoredArray};

#[test]
fn arrays_of_the_wrong_shape_or_type_are_refused_where_they_are_made() {
    for_each_runtime(|target, client| {
        // Guards: an int16 window (2 bytes a value) wrapped as f32 would let kernels read
        // twice the buffer; it is refused with the element type, shape and both sizes.
        let stored =
            StoredArray::from_handle(client.empty(4 * 50 * 2), SampleFormat::I16, 4, 50).unwrap();
        let error = DeviceArray::<f32>::from_handle(stored.handle().clone(), 4, 50).unwrap_err();
        assert_eq!(
            error.to_string(),
            "4 x 50 f32 array (channels x samples) needs 800 bytes, given 400",
            "on {target}"
        );
        // The same buffer is a valid array of half as many 32-bit values.
        let half = DeviceArray::<u32>::from_handle(stored.handle().clone(), 4, 25).unwrap();
        assert_eq!(half.shape(), Shape::new(4, 25));

        // Guards: host values whose count is not channels x samples.
        let error = DeviceArray::<i32>::from_host(client, &[1, 2, 3, 4, 5], 2, 3).unwrap_err();
        assert_eq!(
            error.to_string(),
            "2 x 3 i32 array (channels x samples) needs 6 values, given 5",
            "on {target}"
        );

        // Guards: a view past the end of the buffer.
        let array = DeviceArray::from_host(client, &[0.5f32; 12], 3, 4).unwrap();
        let error = array.front(3, 5).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 15,
                    given: 12,
                    ..
                }
            ),
            "on {target}: {error}"
        );
        // A shorter view shares the buffer: its values are the front of the array's.
        let front = array.front(2, 5).unwrap();
        assert_eq!(front.to_host(client).unwrap(), vec![0.5; 10]);

        // Guards: more values than 32-bit kernel indices reach, refused before allocating.
        let error = DeviceArray::<f32>::empty(client, 1 << 16, 1 << 16).unwrap_err();
        assert!(
            matches!(error, Error::OverLimit { unit: "values", .. }),
            "on {target}: {error}"
        );

        // Guards: per-channel vectors over a buffer too small for their channels.
        let error = ChannelVector::<f32>::from_handle(client.empty(8), 3).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 12,
                    given: 8,
                    ..
                }
            ),
            "on {target}: {error}"
        );

        // Guards: a device window whose array is not as long as the window's read range.
        let halo = ChunkSchedule::symmetric(100, 10, 2)
            .unwrap()
            .window(3)
            .unwrap();
        let error = DeviceWindow::new(array.clone(), halo.clone()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "device window: expected an array of 3 x 14 (channels x samples), given 3 x 4",
            "on {target}"
        );
        let values = vec![1.0f32; 3 * 14];
        let fits = DeviceArray::from_host(client, &values, 3, 14).unwrap();
        let window = DeviceWindow::new(fits, halo).unwrap();
        assert_eq!((window.start(), window.owned_local()), (28, 2..12));

        // Round trips keep every value and type.
        let ints = DeviceArray::from_host(client, &[-3i32, 7, i32::MIN, i32::MAX], 2, 2).unwrap();
        assert_eq!(ints.to_host(client).unwrap(), [-3, 7, i32::MIN, i32::MAX]);
    });
}
