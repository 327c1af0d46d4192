//! Within one redo entry, a text argument that repeats an earlier one (the ids a call's rows
//! share) is written as that one's number.

use super::{put_bytes, take_u32};

/// The lengths of the text arguments an entry numbers, so a later equal one refers to it: an id,
/// a hash, a name (a row's JSON is longer, and not repeated).
pub(super) const SHARED: std::ops::RangeInclusive<usize> = 8..=128;
/// An argument that repeats a numbered text argument of the entry.
pub(super) const REPEATS: u8 = 4;

/// A statement's arguments as an entry writes them: a text argument equal to a numbered earlier
/// one (`shared`, which this adds to) by its number.
pub(super) fn share<'a>(mut args: &'a [u8], shared: &mut Vec<&'a [u8]>, out: &mut Vec<u8>) -> Option<()> {
    let (count, rest) = args.split_first_chunk::<2>()?;
    out.extend_from_slice(count);
    args = rest;
    for _ in 0..u16::from_le_bytes(*count) {
        let len = arg_len(args)?;
        let (arg, rest) = args.split_at(len);
        match (arg[0], numbered(arg, shared)) {
            (2, Some(Numbered::Repeats(n))) => {
                out.push(REPEATS);
                out.extend_from_slice(&n.to_le_bytes());
            }
            (2, Some(Numbered::First(text))) => {
                shared.push(text);
                out.extend_from_slice(arg);
            }
            _ => out.extend_from_slice(arg),
        }
        args = rest;
    }
    Some(())
}

/// A text argument's place among the entry's numbered ones.
enum Numbered<'a> {
    /// It equals the one with this number.
    Repeats(u16),
    /// It is the first with this text, and takes the next number.
    First(&'a [u8]),
}

/// The place of `arg` (a text argument, tag and length included) among the numbered ones; `None`
/// when it is not numbered.
fn numbered<'a>(arg: &'a [u8], shared: &[&[u8]]) -> Option<Numbered<'a>> {
    let text = arg
        .get(5..)
        .filter(|t| SHARED.contains(&t.len()) && shared.len() < u16::MAX as usize)?;
    Some(match shared.iter().position(|s| *s == text) {
        Some(n) => Numbered::Repeats(n as u16),
        None => Numbered::First(text),
    })
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
pub(super) fn unshare<'a>(mut args: &'a [u8], shared: &mut Vec<&'a [u8]>, out: &mut Vec<u8>) -> Option<&'a [u8]> {
    let (count, rest) = args.split_first_chunk::<2>()?;
    out.extend_from_slice(count);
    args = rest;
    for _ in 0..u16::from_le_bytes(*count) {
        if args.first() == Some(&REPEATS) {
            let (n, rest) = args[1..].split_first_chunk::<2>()?;
            let text = shared.get(u16::from_le_bytes(*n) as usize)?;
            out.push(2);
            put_bytes(out, text);
            args = rest;
            continue;
        }
        let len = arg_len(args)?;
        let (arg, rest) = args.split_at(len);
        if let (2, Some(Numbered::First(text))) = (arg[0], numbered(arg, shared)) {
            shared.push(text);
        }
        out.extend_from_slice(arg);
        args = rest;
    }
    Some(args)
}
