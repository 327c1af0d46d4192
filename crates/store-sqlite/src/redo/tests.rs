use super::*;

fn statements(values: &[(&str, &[Arg<'_>])]) -> Statements {
    let mut s = Statements::default();
    for (sql, args) in values {
        s.push(sql, args);
    }
    s
}

fn logged(entries: &[Statements]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let file = OpenOptions::new().append(true).create(true).open(&path).unwrap();
    let mut log = RedoLog {
        file,
        len: 0,
        next: 1,
        pending: Vec::new(),
        broken: false,
        known: HashMap::new(),
        identity: b"store".to_vec(),
    };
    for entry in entries {
        log.append(entry).unwrap();
    }
    std::fs::read(&path).unwrap()
}

#[test]
fn an_entry_keeps_its_statements_and_every_kind_of_argument() {
    let args = [Arg::Null, Arg::Int(-7), Arg::Text("é"), Arg::Bytes(&[0, 255])];
    let bytes = logged(&[statements(&[("INSERT a", &args), ("UPDATE b", &[])])]);
    let entries = decode_entries(&bytes, b"store");
    assert_eq!(entries.len(), 1);
    let (sql, decoded, rest) = decode_statement(&entries[0].1).unwrap();
    assert_eq!(sql, "INSERT a");
    let expected = [
        Owned::Null,
        Owned::Integer(-7),
        Owned::Text("é".into()),
        Owned::Blob(vec![0, 255]),
    ];
    assert_eq!(decoded, expected);
    let (sql, decoded, rest) = decode_statement(rest).unwrap();
    assert_eq!((sql, decoded.len(), rest.len()), ("UPDATE b", 0, 0));
}

#[test]
fn a_torn_or_garbled_tail_ends_the_log_and_keeps_what_came_before() {
    let entries = [statements(&[("A", &[])]), statements(&[("B", &[Arg::Int(1)])])];
    let bytes = logged(&entries);
    let first_len = 4 + u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let whole = decode_entries(&bytes, b"store");
    assert_eq!(whole.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2]);
    for cut in first_len..bytes.len() {
        assert_eq!(decode_entries(&bytes[..cut], b"store").len(), 1, "torn at {cut}");
    }
    assert!(decode_entries(&bytes, b"other").is_empty(), "another store's log");
    for flipped in first_len..bytes.len() {
        let mut garbled = bytes.clone();
        garbled[flipped] ^= 1;
        assert_eq!(decode_entries(&garbled, b"store").len(), 1, "byte {flipped} flipped");
    }
}

#[test]
fn a_statement_text_is_written_once_and_read_back_whole_in_every_entry() {
    let sql = "INSERT INTO events (id) VALUES (?1) RETURNING sequence";
    let one = |id| statements(&[(sql, &[Arg::Text(id)][..]), (sql, &[Arg::Text(id)][..])]);
    let bytes = logged(&[one("a"), one("b")]);
    let entries = decode_entries(&bytes, b"store");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].1, one("b").body, "the second entry reads back whole");
    let occurrences = bytes.windows(sql.len()).filter(|w| *w == sql.as_bytes()).count();
    assert_eq!(occurrences, 1, "the text is in the log once");
}
