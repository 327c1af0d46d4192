//! An agent binding's prompt: a template whose `{{variable}}`s the host fills from the Work it
//! starts or resumes.

use serde_json::Value;

/// The variables a prompt may name.
pub const VARIABLES: [&str; 6] = ["input", "work_id", "scope", "binding", "event_type", "event_data"];

/// What a resumed agent session is told, in place of its binding's prompt.
pub const RESUME: &str = "The Work continues: `{{event_type}}` arrived with {{event_data}}. Carry on from where \
you stopped; if a call of yours was parked, make it again now.";

/// What the variables stand for in one attempt.
#[derive(Debug, Clone)]
pub struct PromptVars<'a> {
    pub input: &'a Value,
    pub work_id: &'a str,
    pub scope: &'a str,
    pub binding: &'a str,
    /// The event the attempt continues from (the Work's creation, or what woke it).
    pub event_type: &'a str,
    pub event_data: &'a Value,
}

/// Each `{{name}}` in `template`, in order (spaces inside the braces allowed).
fn variables(template: &str) -> impl Iterator<Item = (usize, usize, &str)> + '_ {
    let mut from = 0;
    std::iter::from_fn(move || {
        let start = from + template[from..].find("{{")?;
        let end = start + 2 + template[start + 2..].find("}}")?;
        from = end + 2;
        Some((start, end + 2, template[start + 2..end].trim()))
    })
}

/// The variables `template` names that are not in [`VARIABLES`].
pub fn unknown_variables(template: &str) -> Vec<String> {
    variables(template)
        .map(|(.., name)| name)
        .filter(|name| !VARIABLES.contains(name))
        .map(str::to_owned)
        .collect()
}

fn json_text(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The prompt for one attempt: `template` with its variables filled. A Work input the template
/// does not place is appended, so the agent always sees what it was asked with.
pub fn render(template: &str, vars: &PromptVars<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut last = 0;
    let mut placed_input = false;
    for (start, end, name) in variables(template) {
        out.push_str(&template[last..start]);
        let filled = match name {
            "input" => {
                placed_input = true;
                json_text(vars.input)
            }
            "work_id" => vars.work_id.to_owned(),
            "scope" => vars.scope.to_owned(),
            "binding" => vars.binding.to_owned(),
            "event_type" => vars.event_type.to_owned(),
            "event_data" => json_text(vars.event_data),
            _ => template[start..end].to_owned(),
        };
        out.push_str(&filled);
        last = end;
    }
    out.push_str(&template[last..]);
    if !placed_input && !vars.input.is_null() {
        out.push_str("\n\nThe Work's input:\n");
        out.push_str(&json_text(vars.input));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars<'a>(input: &'a Value, data: &'a Value) -> PromptVars<'a> {
        PromptVars {
            input,
            work_id: "w1",
            scope: "demo",
            binding: "agent",
            event_type: "demo.requested",
            event_data: data,
        }
    }

    #[test]
    fn variables_are_filled_and_an_unplaced_input_is_appended() {
        let (input, data) = (json!({"issue": 7}), json!({"by": "ci"}));
        let v = vars(&input, &data);
        assert_eq!(
            render("Fix {{ input }} for {{work_id}} in {{scope}}/{{binding}}", &v),
            "Fix {\n  \"issue\": 7\n} for w1 in demo/agent"
        );
        assert_eq!(
            render("On {{event_type}}: {{event_data}}", &v),
            "On demo.requested: {\n  \"by\": \"ci\"\n}\n\nThe Work's input:\n{\n  \"issue\": 7\n}"
        );
        let none = Value::Null;
        assert_eq!(render("Just do it", &vars(&none, &data)), "Just do it");
        assert_eq!(render("unclosed {{input", &vars(&none, &data)), "unclosed {{input");
    }

    #[test]
    fn unknown_variables_are_named() {
        assert_eq!(
            unknown_variables("{{input}} {{secret}} {{ token }}"),
            ["secret", "token"]
        );
        assert!(unknown_variables("no variables {here}").is_empty());
    }
}
