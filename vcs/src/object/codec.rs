//! Pieces of the object encodings that several objects share (FORMAT 1.4).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::Id;

pub(crate) fn read_ids(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<Id>, DecodeError> {
    let n = r.count(what)?;
    (0..n).map(|_| r.id(what)).collect()
}

pub(crate) fn write_ids(w: &mut Writer, ids: &[Id]) {
    w.uint(ids.len() as u64);
    for id in ids {
        w.id(id);
    }
}

pub(crate) fn write_opt_bytes(w: &mut Writer, b: Option<&[u8]>) {
    match b {
        Some(b) => w.u8(1).bytes(b),
        None => w.u8(0),
    };
}

pub(crate) fn read_opt_bytes(
    r: &mut Reader<'_>,
    what: &'static str,
) -> Result<Option<Vec<u8>>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.bytes(what)?.to_vec())),
        x => Err(DecodeError::new(what, format!("bad option flag {x}"))),
    }
}

pub(crate) fn write_opt_id(w: &mut Writer, id: &Option<Id>) {
    match id {
        Some(id) => w.u8(1).id(id),
        None => w.u8(0),
    };
}

pub(crate) fn read_opt_id(
    r: &mut Reader<'_>,
    what: &'static str,
) -> Result<Option<Id>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.id(what)?)),
        x => Err(DecodeError::new(what, format!("bad option flag {x}"))),
    }
}
