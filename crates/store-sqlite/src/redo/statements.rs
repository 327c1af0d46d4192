//! The recorder of a member's statements: each write statement it ran, with its arguments, in the
//! order it ran them, as the log's entries hold them before their texts are numbered.

use conduit_store_sql::Arg;

use super::{clear_to_usual, put_bytes, MAX_ENTRY, MAX_TEXT, USUAL_BODY};

/// The write statements one member ran, in order, each with its whole text.
#[derive(Default)]
pub struct Statements {
    pub(super) body: Vec<u8>,
    /// A text, value or argument list too long for its length field: the entry cannot be written.
    pub(super) too_long: bool,
}

impl Statements {
    pub fn push(&mut self, sql: &str, args: &[Arg<'_>]) {
        if self.body.capacity() == 0 {
            self.body.reserve(USUAL_BODY);
        }
        self.too_long |= u16::try_from(args.len()).is_err() || sql.len() > MAX_TEXT;
        put_bytes(&mut self.body, sql.as_bytes());
        self.body.extend_from_slice(&(args.len() as u16).to_le_bytes());
        for arg in args {
            match *arg {
                Arg::Null => self.body.push(0),
                Arg::Int(n) => {
                    self.body.push(1);
                    self.body.extend_from_slice(&n.to_le_bytes());
                }
                Arg::Text(text) => {
                    self.body.push(2);
                    put_bytes(&mut self.body, text.as_bytes());
                }
                Arg::Bytes(bytes) => {
                    self.body.push(3);
                    put_bytes(&mut self.body, bytes);
                }
            }
        }
        self.too_long |= self.body.len() > MAX_ENTRY;
    }

    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    /// Empty again, keeping its room for the next member's statements (a usual call's, after a
    /// large one).
    pub fn clear(&mut self) {
        clear_to_usual(&mut self.body);
        self.too_long = false;
    }

    /// The statements' bytes, with their whole texts.
    pub fn len(&self) -> usize {
        self.body.len()
    }
}
