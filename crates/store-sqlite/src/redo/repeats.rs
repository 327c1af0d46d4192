//! Within one redo entry, a text argument that repeats an earlier one (the ids a call's rows
//! share) is written as that one's number.

use std::collections::HashMap;

use super::{put_bytes, take_u32};

/// The lengths of the text arguments an entry numbers, so a later equal one refers to it: an id,
/// a hash, a name (a row's JSON is longer, and not repeated).
pub(super) const SHARED: std::ops::RangeInclusive<usize> = 8..=128;
/// An argument that repeats a numbered text argument of the entry.
pub(super) const REPEATS: u8 = 4;

/// A statement's arguments as an entry writes them, after `out`: a text argument equal to a
/// numbered earlier one (`shared`, which this adds to) by its number; answers the bytes after them.
pub(super) fn share<'a>(mut args: &'a [u8], shared: &mut Numbers<'a>, out: &mut Vec<u8>) -> Option<&'a [u8]> {
    let (count, rest) = args.split_first_chunk::<2>()?;
    out.extend_from_slice(count);
    args = rest;
    for _ in 0..u16::from_le_bytes(*count) {
        let len = arg_len(args)?;
        let (arg, rest) = args.split_at(len);
        match (arg[0], shared.place(arg)) {
            (2, Some(Numbered::Repeats(n))) => {
                out.push(REPEATS);
                out.extend_from_slice(&n.to_le_bytes());
            }
            (2, Some(Numbered::First(text))) => {
                shared.take(text);
                out.extend_from_slice(arg);
            }
            _ => out.extend_from_slice(arg),
        }
        args = rest;
    }
    Some(args)
}

/// A text argument's place among the entry's numbered ones.
enum Numbered<'a> {
    /// It equals the one with this number.
    Repeats(u16),
    /// It is the first with this text, and takes the next number.
    First(&'a [u8]),
}

/// The texts an entry has numbered so far, in order, and each one's number. Hashed with foldhash:
/// with std's SipHash, numbering cost 4% of a call's instructions (callgrind, `--bench toolbelt`).
pub(super) struct Numbers<'a> {
    texts: Vec<&'a [u8]>,
    numbers: HashMap<&'a [u8], u16, foldhash::fast::RandomState>,
}

/// Room for the distinct ids and names of a toolbelt call's entry (about 20), so the map is not
/// grown four times an entry.
const USUAL_NUMBERED: usize = 32;

impl<'a> Numbers<'a> {
    pub(super) fn for_entry() -> Numbers<'a> {
        Numbers {
            texts: Vec::with_capacity(USUAL_NUMBERED),
            numbers: HashMap::with_capacity_and_hasher(USUAL_NUMBERED, Default::default()),
        }
    }

    /// The place of `arg` (a text argument, tag and length included) among the numbered ones;
    /// `None` when it is not numbered (its length, or a new text once every number is taken).
    fn place(&self, arg: &'a [u8]) -> Option<Numbered<'a>> {
        let text = arg.get(5..).filter(|t| SHARED.contains(&t.len()))?;
        match self.numbers.get(text) {
            Some(n) => Some(Numbered::Repeats(*n)),
            None => (self.texts.len() < u16::MAX as usize).then_some(Numbered::First(text)),
        }
    }

    /// The text numbered `n`.
    fn text(&self, n: u16) -> Option<&'a [u8]> {
        self.texts.get(n as usize).copied()
    }

    /// Numbers `text`, the first of its kind.
    fn take(&mut self, text: &'a [u8]) {
        self.numbers.insert(text, self.texts.len() as u16);
        self.texts.push(text);
    }
}

/// The bytes of the argument at the start of `args`, its tag included.
fn arg_len(args: &[u8]) -> Option<usize> {
    let len = match args.first()? {
        0 => 1,
        1 => 9,
        2 | 3 => 5 + take_u32(&args[1..])?.0 as usize,
        _ => return None,
    };
    (args.len() >= len).then_some(len)
}

/// A statement's arguments whole again (each repeat as the text it repeats), after `out`; answers
/// the bytes after them.
pub(super) fn unshare<'a>(mut args: &'a [u8], shared: &mut Numbers<'a>, out: &mut Vec<u8>) -> Option<&'a [u8]> {
    let (count, rest) = args.split_first_chunk::<2>()?;
    out.extend_from_slice(count);
    args = rest;
    for _ in 0..u16::from_le_bytes(*count) {
        if args.first() == Some(&REPEATS) {
            let (n, rest) = args[1..].split_first_chunk::<2>()?;
            let text = shared.text(u16::from_le_bytes(*n))?;
            out.push(2);
            put_bytes(out, text);
            args = rest;
            continue;
        }
        let len = arg_len(args)?;
        let (arg, rest) = args.split_at(len);
        if let (2, Some(Numbered::First(text))) = (arg[0], shared.place(arg)) {
            shared.take(text);
        }
        out.extend_from_slice(arg);
        args = rest;
    }
    Some(args)
}
