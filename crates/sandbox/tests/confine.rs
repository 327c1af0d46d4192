//! A real confined child per case: what the policy lets through works, what it does not is refused
//! by the kernel. Each refusal has a control (the same command unconfined, or under a policy that
//! allows it) so a case cannot pass because the command fails for another reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;

use conduit_core::sandbox::{Network, Sandbox, SandboxSpec};
use conduit_sandbox::{kernel, Confinement, Policy, Rulesets};

mod common;
use common::{layout, Layout};

/// Shared by every case, as a daemon shares its rulesets between attempts.
static RULESETS: Rulesets = Rulesets::new();

/// Runs `script` with `/bin/sh -c` under `setting` (or unconfined with `None`); its exit status.
fn run(layout: &Layout, setting: Option<&Sandbox>, script: &str) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(script)
            .current_dir(&layout.paths.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let Some(setting) = setting else {
            return cmd.status().await.unwrap().success();
        };
        let policy = Policy::for_execution(setting, &layout.paths).unwrap();
        let confinement = Confinement::prepare(&policy, &kernel::probe(), &RULESETS).unwrap();
        let mut child = confinement.spawn(&mut cmd).unwrap();
        RULESETS.make_ready(&policy);
        child.wait().await.unwrap().success()
    })
}

/// (unconfined, confined); confined runs first, so what the control creates cannot make it pass.
fn both(layout: &Layout, script: &str) -> (bool, bool) {
    let confined = run(layout, Some(&Sandbox::default()), script);
    (run(layout, None, script), confined)
}

#[test]
fn the_default_hides_the_state_directory_but_the_run_directory() {
    let l = layout();
    let state = l.paths.state_dir.display();
    let token = format!("cat {state}/private/operator.token");
    assert_eq!(both(&l, &token), (true, false), "the operator token");
    assert_eq!(
        both(&l, &format!("touch {state}/planted")),
        (true, false),
        "writing the state dir"
    );
    assert_eq!(
        both(&l, &format!("ls {state}/private")),
        (true, true),
        "names stay listable"
    );
    assert_eq!(
        both(&l, &format!("cat {state}/runs/k/token")),
        (true, true),
        "its own token"
    );
    assert_eq!(
        both(&l, &format!("touch {state}/runs/k/x")),
        (true, false),
        "run dir is read-only"
    );
    assert_eq!(both(&l, &format!("cat {}/readable", l.outside.display())), (true, true));
    assert_eq!(
        both(&l, "echo hi > here && cat here"),
        (true, true),
        "its working directory"
    );
    assert_eq!(
        both(&l, &format!("touch {}/x", l.outside.display())),
        (true, false),
        "elsewhere"
    );
    assert_eq!(both(&l, "echo x > /dev/null"), (true, true), "the null device");
    assert_eq!(
        both(&l, &format!("ln {state}/private/operator.token linked")),
        (true, false),
        "no hard link out of the state directory"
    );
}

#[test]
fn a_ruleset_made_ahead_hides_as_one_built_at_start() {
    let l = layout();
    // Old enough for the first listing to be kept, so later rulesets are made from it ahead.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let state = l.paths.state_dir.display();
    for attempt in 0..3 {
        let token = format!("cat {state}/private/operator.token");
        assert!(!run(&l, Some(&Sandbox::default()), &token), "attempt {attempt}");
        let own = format!("cat {state}/runs/k/token");
        assert!(run(&l, Some(&Sandbox::default()), &own), "attempt {attempt}");
        assert!(
            run(&l, Some(&Sandbox::default()), "echo hi > here"),
            "attempt {attempt}"
        );
    }
}

#[test]
fn signals_and_traces_stop_at_the_sandbox() {
    let l = layout();
    let pid = std::process::id();
    assert_eq!(
        both(&l, &format!("kill -0 {pid}")),
        (true, false),
        "signalling the parent"
    );
    assert_eq!(
        both(&l, &format!("head -c1 /proc/{pid}/environ")),
        (true, false),
        "its environment"
    );
    assert_eq!(
        both(&l, &format!("head -c1 /proc/{pid}/cmdline")),
        (true, true),
        "public /proc files"
    );
    assert_eq!(both(&l, "sleep 5 & kill $!"), (true, true), "its own children");
    let threads = format!("for t in /proc/{pid}/task/*; do kill -0 ${{t##*/}} && exit 0; done; exit 1");
    assert_eq!(both(&l, &threads), (true, false), "any thread of the parent");
}

#[test]
fn write_paths_are_writable_and_read_lists_narrow() {
    let l = layout();
    let outside = l.outside.display().to_string();
    let writes = Sandbox::Confined(SandboxSpec {
        write: vec![outside.clone()],
        ..SandboxSpec::default()
    });
    assert!(run(&l, Some(&writes), &format!("touch {outside}/x")));
    let narrow = Sandbox::Confined(SandboxSpec {
        read: Some(vec![]),
        ..SandboxSpec::default()
    });
    assert!(!run(&l, Some(&narrow), &format!("cat {outside}/readable")));
    assert!(run(
        &l,
        Some(&narrow),
        "cat /etc/hostname >/dev/null || cat /etc/passwd >/dev/null"
    ));
}

#[test]
fn no_network_means_no_connection() {
    let l = layout();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let bash = |setting: Option<&Sandbox>| {
        run(
            &l,
            setting,
            &format!("command -v bash >/dev/null && bash -c '{connect}'"),
        )
    };
    let none = Sandbox::Confined(SandboxSpec {
        network: Network::None,
        ..SandboxSpec::default()
    });
    assert!(!bash(Some(&none)));
    assert!(listener.accept().is_err(), "the listener saw no connection");
    assert!(bash(Some(&Sandbox::default())), "control: host network connects");
    assert!(listener.accept().is_ok());
    assert!(
        run(&l, Some(&none), "echo x > here"),
        "the rest of the policy still holds"
    );
}

#[test]
fn an_older_kernel_refuses_the_policy_naming_what_is_missing() {
    let l = layout();
    let policy = Policy::for_execution(&Sandbox::default(), &l.paths).unwrap();
    let old = conduit_sandbox::Kernel {
        landlock_abi: 2,
        network_namespaces: true,
    };
    let refused = Confinement::prepare(&policy, &old, &RULESETS).err().unwrap();
    assert!(refused.to_string().contains("Landlock ABI 3"), "{refused}");
    assert!(Path::new("/bin/sh").exists());
}

/// A state directory named through a symbolic link, with its run directory spelled the same way
/// (the contract the daemon keeps: it once resolved only the hidden tree, which hid the attempt's
/// own token): the run directory stays reachable, the rest hidden under either spelling.
#[test]
fn a_state_directory_reached_through_a_link_is_hidden_but_its_run_directory() {
    let l = layout();
    let real = l.paths.state_dir.parent().unwrap().to_owned();
    let links = tempfile::tempdir().unwrap();
    let via = links.path().join("via");
    std::os::unix::fs::symlink(&real, &via).unwrap();
    let respell = |p: &Path| via.join(p.strip_prefix(&real).unwrap());
    let mut linked = layout();
    linked.paths.state_dir = respell(&l.paths.state_dir);
    linked.paths.run_dir = respell(&l.paths.run_dir);
    linked.paths.workdir = respell(&l.paths.workdir);
    linked.paths.tmpdir = respell(&l.paths.tmpdir);
    let state = linked.paths.state_dir.display().to_string();
    assert_eq!(
        both(&linked, &format!("cat {state}/runs/k/token")),
        (true, true),
        "its own token"
    );
    assert_eq!(
        both(&linked, &format!("cat {state}/private/operator.token")),
        (true, false)
    );
    assert_eq!(
        both(
            &linked,
            &format!("cat {}/private/operator.token", l.paths.state_dir.display())
        ),
        (true, false),
        "nor through the resolved spelling"
    );
}
