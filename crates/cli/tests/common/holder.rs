//! Connection floods from a helper process, so the test's own open-file limit is not the bound.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Connects `count` times to `socket` from a process of its own (so the test's own open-file limit
/// is not the bound), sending half a request on each when `slow`, and holds them until dropped.
pub struct Holder(Child);

const HOLD: &str = r#"
import socket, sys
path, count, slow = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "slow"
held = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        if slow:
            s.send(b"POST /v1/toolbelt/call HTTP/1.1\r\nHost: localhost\r\n")
        held.append(s)
    except OSError:
        s.close()
print(len(held), flush=True)
sys.stdin.read()
"#;

impl Holder {
    pub fn start(socket: &Path, count: usize, slow: bool) -> (Holder, usize) {
        let mut child = Command::new("python3")
            .args([
                "-c",
                HOLD,
                socket.to_str().unwrap(),
                &count.to_string(),
                if slow { "slow" } else { "idle" },
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (Holder(child), line.trim().parse().unwrap())
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
