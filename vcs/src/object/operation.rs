//! Operations and their event pages (FORMAT 7.5, 7.5a).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

use super::codec::{read_ids, write_ids};
use super::Event;

/// Operation format version: 1 with its events in itself, 2 with them in pages.
pub const OPERATION_VERSION: u8 = 2;
/// Event page format version.
pub const EVENT_PAGE_VERSION: u8 = 1;
/// Most events an operation holds in itself; with more, they are written in pages, so
/// that reading an operation (every command reads the head) does not decode them all.
pub const INLINE_EVENTS: usize = 256;
/// Events in one page (the last may hold fewer).
pub const EVENTS_PER_PAGE: usize = 1024;

/// An operation: one change to the repository, with the view it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Parent operations (several after concurrent writers were merged).
    pub parents: Vec<Id>,
    /// The view after this operation.
    pub view: Id,
    /// Start time, milliseconds since the Unix epoch.
    pub start_ms: i64,
    /// End time, milliseconds since the Unix epoch.
    pub end_ms: i64,
    /// Local time zone offset, minutes.
    pub tz_offset_min: i32,
    /// User name.
    pub user: String,
    /// Host name.
    pub host: String,
    /// What was done, in words (the command line).
    pub description: String,
    /// What changed, typed.
    pub events: OpEvents,
}

/// An operation's events: in the operation itself, or (more than [`INLINE_EVENTS`]) in
/// event pages it names, read when asked for (`Repo::events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpEvents {
    /// The events themselves.
    Inline(Vec<Event>),
    /// How many events, and the pages holding them, in order.
    Paged {
        /// Events in all pages.
        count: u64,
        /// The pages' ids (objects of kind `EventPage`).
        pages: Vec<Id>,
    },
}

impl OpEvents {
    /// How many events.
    pub fn len(&self) -> u64 {
        match self {
            OpEvents::Inline(e) => e.len() as u64,
            OpEvents::Paged { count, .. } => *count,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Encodes one page of an operation's events.
pub fn encode_event_page(events: &[Event]) -> Vec<u8> {
    let mut w = Writer::with_header(Kind::EventPage as u8, EVENT_PAGE_VERSION);
    w.uint(events.len() as u64);
    for e in events {
        e.encode(&mut w);
    }
    w.finish()
}

/// Decodes one page of an operation's events.
pub fn decode_event_page(bytes: &[u8]) -> Result<Vec<Event>, DecodeError> {
    const W: &str = "event page";
    let mut r = Reader::new(bytes);
    r.header(W, Kind::EventPage as u8, EVENT_PAGE_VERSION)?;
    let n = r.count(W)?;
    let events = (0..n)
        .map(|_| Event::decode(&mut r))
        .collect::<Result<_, _>>()?;
    r.finish(W)?;
    Ok(events)
}

impl Operation {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        // Version 1 while the events are inline, so such an operation encodes as it
        // always did.
        let version = match self.events {
            OpEvents::Inline(_) => 1,
            OpEvents::Paged { .. } => OPERATION_VERSION,
        };
        let mut w = Writer::with_header(Kind::Operation as u8, version);
        write_ids(&mut w, &self.parents);
        w.id(&self.view)
            .int(self.start_ms)
            .int(self.end_ms)
            .int(i64::from(self.tz_offset_min))
            .bytes(self.user.as_bytes())
            .bytes(self.host.as_bytes())
            .bytes(self.description.as_bytes());
        match &self.events {
            OpEvents::Inline(events) => {
                w.uint(events.len() as u64);
                for e in events {
                    e.encode(&mut w);
                }
            }
            OpEvents::Paged { count, pages } => {
                w.uint(*count);
                write_ids(&mut w, pages);
            }
        }
        w.finish()
    }

    /// Decodes an operation.
    pub fn decode(bytes: &[u8]) -> Result<Operation, DecodeError> {
        const W: &str = "operation";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Operation as u8, OPERATION_VERSION)?;
        let parents = read_ids(&mut r, W)?;
        let view = r.id(W)?;
        let start_ms = r.int(W)?;
        let end_ms = r.int(W)?;
        let tz_offset_min = i32::try_from(r.int(W)?)
            .map_err(|_| DecodeError::new(W, "time zone offset out of range"))?;
        let user = r.str(W)?.to_string();
        let host = r.str(W)?.to_string();
        let description = r.str(W)?.to_string();
        let events = if version == 1 {
            let n = r.count(W)?;
            OpEvents::Inline(
                (0..n)
                    .map(|_| Event::decode(&mut r))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            let count = r.uint(W)?;
            let pages = read_ids(&mut r, W)?;
            if pages.is_empty() || count.div_ceil(EVENTS_PER_PAGE as u64) != pages.len() as u64 {
                return Err(DecodeError::new(
                    W,
                    format!("{count} events do not fill {} pages", pages.len()),
                ));
            }
            OpEvents::Paged { count, pages }
        };
        r.finish(W)?;
        Ok(Operation {
            parents,
            view,
            start_ms,
            end_ms,
            tz_offset_min,
            user,
            host,
            description,
            events,
        })
    }
}
