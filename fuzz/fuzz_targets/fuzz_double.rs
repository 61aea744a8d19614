#![no_main]
//! decode_f64_slice on arbitrary bytes: never panics; Ok only for 8 bytes, never NaN or -0.0,
//! re-encodes to the input (except the zero alias 7F FF..). Two 8-byte halves of a 16-byte
//! input: byte order equals numeric order.

use libfuzzer_sys::fuzz_target;
use rediskv::{decode_f64_slice, encode_f64};

const ZERO_ALIAS: [u8; 8] = [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];

fuzz_target!(|data: &[u8]| {
    if let Ok(x) = decode_f64_slice(data) {
        assert_eq!(data.len(), 8);
        assert!(!x.is_nan());
        assert!(x != 0.0 || x.is_sign_positive());
        let encoded = encode_f64(x).expect("not NaN");
        assert!(encoded == data || data == ZERO_ALIAS);
    }
    if data.len() == 16 {
        let (a, b) = data.split_at(8);
        if let (Ok(x), Ok(y)) = (decode_f64_slice(a), decode_f64_slice(b)) {
            if a != ZERO_ALIAS && b != ZERO_ALIAS {
                assert_eq!(a.cmp(b), x.partial_cmp(&y).expect("no NaN"));
            }
        }
    }
});
