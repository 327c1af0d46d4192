//! `docs/configuration.md`: one section per object of the schema, in the order a reader meets
//! them from the top of the file, each with the JSON pointers it sits at and a table of its fields.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

/// An object of the schema, by its definition name (`None`: the file's top level).
type Section = Option<String>;

/// The reference page for `schema` (as [`super::schema`] makes it).
pub fn markdown(schema: &Value) -> String {
    let mut page = Page {
        schema,
        order: vec![None],
        at: BTreeMap::new(),
    };
    page.at.entry(None).or_default().push(String::new());
    let mut next = 0;
    while next < page.order.len() {
        let section = page.order[next].clone();
        let pointer = page.at[&section][0].clone();
        page.visit(&pointer, page.object(&section));
        next += 1;
    }
    page.render()
}

struct Page<'a> {
    schema: &'a Value,
    order: Vec<Section>,
    /// Where each section's object sits, as JSON pointers with `<name>` for a key and `<n>` for an
    /// index, and the executors it is the `config` of.
    at: BTreeMap<Section, Vec<String>>,
}

impl<'a> Page<'a> {
    fn object(&self, section: &Section) -> &'a Value {
        match section {
            None => self.schema,
            Some(name) => &self.schema["$defs"][name],
        }
    }

    /// Finds the sections `object`'s fields lead to.
    fn visit(&mut self, pointer: &str, object: &Value) {
        for (field, schema) in properties(object) {
            self.reach(&format!("{pointer}/{field}"), schema);
        }
        for case in object["allOf"].as_array().into_iter().flatten() {
            let executor = case["if"]["properties"]["executor"]["const"]
                .as_str()
                .unwrap_or_default();
            let config = &case["then"]["properties"]["config"];
            self.reach(&format!("{pointer}/config (executor `{executor}`)"), config);
        }
    }

    fn reach(&mut self, pointer: &str, schema: &Value) {
        if let Some(name) = reference(schema) {
            let section = Some(name.to_owned());
            if !self.at.contains_key(&section) {
                self.order.push(section.clone());
            }
            self.at.entry(section).or_default().push(pointer.to_owned());
        } else if schema.get("items").is_some() {
            self.reach(&format!("{pointer}/<n>"), &schema["items"]);
        } else if schema["additionalProperties"].is_object() {
            self.reach(&format!("{pointer}/<name>"), &schema["additionalProperties"]);
        }
        for option in schema["oneOf"].as_array().into_iter().flatten() {
            self.reach(pointer, option);
        }
    }

    fn render(&self) -> String {
        let mut out = String::from(HEADER);
        for section in &self.order {
            let object = self.object(section);
            let title = section.as_deref().unwrap_or("The file");
            let _ = writeln!(out, "\n## {title}\n");
            let at: Vec<String> = self.at[section].iter().map(|p| format!("`{}`", or_root(p))).collect();
            let _ = writeln!(out, "At {}.\n", at.join(", "));
            if let Some(text) = object["description"].as_str() {
                let _ = writeln!(out, "{}\n", one_line(text));
            }
            self.table(&mut out, object);
        }
        out
    }

    fn table(&self, out: &mut String, object: &Value) {
        let required: Vec<&str> = object["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str("| field | type | required or default | description |\n|---|---|---|---|\n");
        for (field, schema) in properties(object) {
            let need = match schema.get("default") {
                _ if required.contains(&field.as_str()) => "required".to_owned(),
                Some(default) => format!("`{default}`"),
                None => "optional".to_owned(),
            };
            let about = schema["description"].as_str().map(one_line).unwrap_or_default();
            let _ = writeln!(out, "| `{field}` | {} | {need} | {about} |", type_of(schema));
        }
    }
}

fn properties(object: &Value) -> impl Iterator<Item = (&String, &Value)> {
    object["properties"].as_object().into_iter().flatten()
}

fn reference(schema: &Value) -> Option<&str> {
    schema["$ref"].as_str()?.strip_prefix("#/$defs/")
}

/// A field's type in words, linking the sections it leads to.
fn type_of(schema: &Value) -> String {
    if let Some(name) = reference(schema) {
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(value) = schema.get("const") {
        return format!("`{value}`");
    }
    if let Some(options) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
        return options.iter().map(type_of).collect::<Vec<_>>().join(" or ");
    }
    if let Some(values) = schema["enum"].as_array() {
        return values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(" or ");
    }
    match schema["type"].as_str() {
        Some("array") => format!("array of {}", type_of(&schema["items"])),
        Some("object") if schema["additionalProperties"].is_object() => {
            format!("map of name to {}", type_of(&schema["additionalProperties"]))
        }
        Some(other) => other.to_owned(),
        None => "any".to_owned(),
    }
}

fn or_root(pointer: &str) -> &str {
    if pointer.is_empty() {
        "/"
    } else {
        pointer
    }
}

/// Table cells and paragraphs hold one line: doc comments wrap.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

const HEADER: &str = "# Configuration reference

<!-- Generated from the configuration types by `conduit_config::schema`; do not edit by hand.
     After changing a type, run `OPEN_CONDUIT_BLESS=1 cargo test -p conduit-config --test schema`. -->

Open Conduit reads one JSON file (`open-conduit daemon --config FILE`, or `open-conduit config apply
FILE` to a running daemon). The daemon checks it strictly: an unknown field, a duplicate key or a
`null` anywhere is refused with a diagnostic naming its JSON pointer. This page lists every field;
[`schemas/config.schema.json`](../schemas/config.schema.json) is the same shape as a JSON Schema for
editors (in VS Code, map it in `json.schemas` to your file). Rules a schema cannot state (a binding's
operations within its scope's ceiling, routes naming bindings that exist, durations such as `30s`,
absolute paths) are checked by `open-conduit config check FILE` (offline) and `open-conduit config validate FILE`
(through the running daemon).
";
