#![no_main]
//! RdbFileReader on arbitrary bytes after a valid header, fed in pieces whose size the first
//! byte picks: never panics, an error names an offset within the input, and the answer is
//! the one reading the bytes whole gives.

use libfuzzer_sys::fuzz_target;
use rediskv::Error;
use rediskv::{RdbFileReader, RdbItem};

fn read_in_pieces(file: &[u8], piece: usize) -> Result<Vec<RdbItem>, Error> {
    let mut reader = RdbFileReader::new();
    let mut items = Vec::new();
    for p in file.chunks(piece) {
        reader.feed(p);
        while let Some(item) = reader.next_item()? {
            items.push(item);
        }
    }
    reader.finish();
    while let Some(item) = reader.next_item()? {
        items.push(item);
    }
    Ok(items)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(rest);
    let pieces = read_in_pieces(&file, usize::from(first).max(1));
    if let Err(Error::RdbFile { offset, .. }) = &pieces {
        assert!(*offset <= file.len() as u64);
    }
    assert_eq!(pieces, RdbFileReader::read_all(&file));
});
