//! Shell lines that call toolbelt operations from an execution, keeping each answer in a file,
//! and the test's side that reads them back.

use serde_json::Value;

/// Shell lines that call `operation` with `input`, keeping its stdout, stderr and exit status
/// under `dir/<name>.{out,err,status}`.
pub fn call_line(dir: &str, name: &str, operation: &str, input: Value) -> String {
    let input = input.to_string().replace('\'', "'\\''");
    format!(
        "os call {operation} --input '{input}' > {dir}/{name}.out 2> {dir}/{name}.err; echo $? > {dir}/{name}.status; "
    )
}

/// A script that makes each call in turn, keeping its answer, then declares success.
pub fn script_of(dir: &str, calls: &[(&str, &str, Value)]) -> String {
    let lines: String = calls
        .iter()
        .map(|(name, op, input)| call_line(dir, name, op, input.clone()))
        .collect();
    format!("{lines}os outcome succeeded")
}

pub struct Answers(pub std::path::PathBuf);

impl Answers {
    pub fn read(&self, name: &str, ext: &str) -> String {
        std::fs::read_to_string(self.0.join(format!("{name}.{ext}"))).unwrap_or_default()
    }

    pub fn output(&self, name: &str) -> Value {
        assert_eq!(
            self.read(name, "status").trim(),
            "0",
            "{name}: {}",
            self.read(name, "err")
        );
        serde_json::from_str(&self.read(name, "out")).unwrap()
    }

    /// The refusal's code (stderr's first line is `<code>: <message>`).
    pub fn refused(&self, name: &str) -> String {
        assert_eq!(
            self.read(name, "status").trim(),
            "1",
            "{name}: {}",
            self.read(name, "out")
        );
        self.read(name, "err").split(':').next().unwrap().to_owned()
    }
}
