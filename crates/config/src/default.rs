/// The configuration a daemon runs when it has no config file: one `setup` scope whose `shell`
/// binding emits `demo.hello` and declares success, routed from `demo.requested`.
pub fn default_config_json() -> &'static str {
    r#"{
  "version": 1,
  "scopes": {
    "setup": {
      "authorization": {"operations": ["emit", "read_context", "declare_outcome", "wait", "create_work"]},
      "bindings": {
        "shell": {
          "executor": "shell",
          "config": {"command": ["/bin/sh", "-c", "os emit demo.hello --data '{\"greeting\":\"hello\"}' && os outcome succeeded --summary 'said hello'"]},
          "operations": ["emit", "read_context", "declare_outcome", "wait", "create_work"]
        }
      },
      "routes": [{"on": "demo.requested", "binding": "shell"}]
    }
  },
  "limits": {"causal_max_depth": 32, "causal_per_minute": 600}
}
"#
}
