//! Installed packages on this daemon: install (read the manifest, pass the RFC 0076 gate, check
//! the names against the release and every other package, copy the package into
//! `<state>/packages/<name>/`, record it), list, show and remove. A package's status is judged
//! against the current grant set at every read: while the grant no longer covers what it requires,
//! it is flagged `requirement_unmet`.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use conduit_config::CurrentConfig;
use conduit_core::{ErrorCode, Refusal};
use conduit_packages::gate::{self, unmet_now};
use conduit_packages::{Manifest, MANIFEST_FILE};
use conduit_server::{now, PackageControl};
use conduit_store::{PackageRecord, Store};
use conduit_toolbelt::registry::{Handler, HandlerCall, HandlerFuture, OperationError};
use serde_json::{json, Value};

use crate::state::create_private_dir;

/// The largest manifest read.
const MAX_MANIFEST: u64 = 1024 * 1024;

pub struct PackageService {
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    /// `<state>/packages`: each installed package's copy.
    pub dir: PathBuf,
    /// Serves what is installed: reloaded after every install and removal.
    pub host: Arc<crate::extension::PackageHost>,
}

impl PackageControl for PackageService {
    fn list(&self) -> Result<Vec<Value>, Refusal> {
        let records = self.store.read(|tx| tx.list_packages()).map_err(internal)?;
        Ok(records.iter().map(|r| self.listing(r)).collect())
    }

    fn show(&self, name: &str) -> Result<Value, Refusal> {
        let record = self.store.read(|tx| tx.get_package(name)).map_err(internal)?;
        record
            .map(|r| self.listing(&r))
            .ok_or_else(|| Refusal::not_found("package"))
    }

    fn install(&self, dir: &str) -> Result<Value, Refusal> {
        let source = Path::new(dir);
        if !source.is_absolute() {
            return Err(Refusal::invalid_input(
                "`dir` is an absolute path to the package directory",
            ));
        }
        let manifest = read_manifest(source)?;
        let config = self.config.get();
        let approval = gate::check(&manifest, &config.package_grant(), config.package_gating())?;
        self.check_names(&manifest)?;
        check_entry(source, &manifest)?;
        self.copy_in(source, &manifest.name)?;
        let record = PackageRecord {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            manifest: serde_json::to_string(&manifest).map_err(|_| Refusal::internal())?,
            approved_grant: approval.grant,
            approved_gating: approval.gating,
            installed_at: now(),
        };
        self.store.write(|tx| tx.put_package(&record)).map_err(internal)?;
        self.host.reload();
        Ok(self.listing(&record))
    }

    fn remove(&self, name: &str) -> Result<Value, Refusal> {
        let record = self.store.read(|tx| tx.get_package(name)).map_err(internal)?;
        let record = record.ok_or_else(|| Refusal::not_found("package"))?;
        if self.config.get().names_namespace(name) {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                "the active configuration grants this package's operations",
            )
            .with_remedy("remove them (and its toolsets) from the configuration first"));
        }
        self.store.write(|tx| tx.delete_package(name)).map_err(internal)?;
        let _ = fs::remove_dir_all(self.dir.join(name));
        self.host.reload();
        Ok(json!({"removed": record.name, "version": record.version}))
    }
}

impl PackageService {
    /// A package as operators see it, judged against the current grant set.
    fn listing(&self, record: &PackageRecord) -> Value {
        let manifest: Option<Manifest> = serde_json::from_str(&record.manifest).ok();
        let requires = manifest
            .as_ref()
            .map(|m| m.runtime.requires.clone())
            .unwrap_or_default();
        let config = self.config.get();
        let unmet = unmet_now(&requires, &config.package_grant(), config.package_gating());
        let names = |ops: Vec<String>| json!(ops);
        json!({
            "name": record.name,
            "version": record.version,
            "manifest": format!("{}@{}", record.name, record.version),
            "requires": requires,
            "permissions": manifest.as_ref().map(|m| m.permissions.clone()).unwrap_or_default(),
            "operations": names(manifest.as_ref().map(|m| m.provides.operations.iter().map(|o| o.name.clone()).collect()).unwrap_or_default()),
            "toolsets": names(manifest.as_ref().map(|m| m.provides.toolsets.iter().map(|t| t.name.clone()).collect()).unwrap_or_default()),
            "approved": {"grant": record.approved_grant, "gating": record.approved_gating},
            "gate": match manifest.as_ref().map(|m| (m.provides.operation_gate, m.gates())) {
                Some((true, true)) => json!("installed"),
                Some((true, false)) => json!("not installed: the manifest does not ask for the operation.gate permission"),
                _ => Value::Null,
            },
            "status": if unmet.is_empty() { "ok" } else { "requirement_unmet" },
            "unmet": unmet,
            "installed_at": record.installed_at,
        })
    }

    /// The package's names against the release and every other installed package: the toolbelt's
    /// registration rules (namespace, conflicts, no exec tier) decide.
    fn check_names(&self, manifest: &Manifest) -> Result<(), Refusal> {
        let others = installed_manifests(&self.dir)
            .iter()
            .filter(|m| m.name != manifest.name)
            .map(names_only)
            .collect();
        let mut registry = crate::registry_with(None, None, others);
        registry.register(names_only(manifest)).map_err(|e| {
            let code = if e.code == "conflict" {
                ErrorCode::Conflict
            } else {
                ErrorCode::InvalidManifest
            };
            Refusal::new(code, format!("{}: {}", e.operation, e.reason))
        })
    }

    /// Copies the package into `<state>/packages/<name>/` (owner-only), replacing an earlier copy
    /// only once the new one is whole.
    fn copy_in(&self, source: &Path, name: &str) -> Result<(), Refusal> {
        create_private_dir(&self.dir).map_err(|_| Refusal::internal())?;
        let staging = self.dir.join(format!(".{name}.{}", uuid::Uuid::now_v7()));
        let target = self.dir.join(name);
        let copied = copy_tree(source, &staging).and_then(|()| {
            let _ = fs::remove_dir_all(&target);
            fs::rename(&staging, &target).map_err(|_| Refusal::internal())
        });
        if copied.is_err() {
            let _ = fs::remove_dir_all(&staging);
        }
        copied
    }
}

/// The manifests of the installed copies under `dir` (`<state>/packages`), by name. A copy whose
/// manifest no longer reads is skipped.
pub fn installed_manifests(dir: &Path) -> Vec<Manifest> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut manifests: Vec<Manifest> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| read_manifest(&e.path()).ok())
        .collect();
    manifests.sort_by(|a, b| a.name.cmp(&b.name));
    manifests
}

/// A package's registration for its names alone (configuration checks, install conflicts).
pub fn names_only(manifest: &Manifest) -> conduit_toolbelt::registry::Registration {
    manifest.registration(Arc::new(NotLoaded))
}

fn read_manifest(dir: &Path) -> Result<Manifest, Refusal> {
    let path = dir.join(MANIFEST_FILE);
    let too_large = fs::metadata(&path).map(|m| m.len() > MAX_MANIFEST).unwrap_or(false);
    let bytes = fs::read(&path).ok().filter(|_| !too_large).ok_or_else(|| {
        Refusal::new(
            ErrorCode::InvalidManifest,
            format!("no readable {MANIFEST_FILE} (at most 1 MiB) in the directory"),
        )
    })?;
    Manifest::parse(&bytes).map_err(|invalid| {
        Refusal::new(ErrorCode::InvalidManifest, invalid.message).with_field("pointer", invalid.pointer.into())
    })
}

/// The entry must be an executable regular file inside the package.
fn check_entry(dir: &Path, manifest: &Manifest) -> Result<(), Refusal> {
    let entry = fs::symlink_metadata(dir.join(&manifest.runtime.entry));
    match entry {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o100 != 0 => Ok(()),
        _ => Err(Refusal::new(
            ErrorCode::InvalidManifest,
            "the entry is not an executable file in the package",
        )
        .with_field("pointer", "/runtime/entry".into())),
    }
}

/// Copies regular files and directories, owner-only, keeping the owner's execute bit; a symbolic
/// link anywhere is refused, so the copy holds only what the package directory itself holds.
fn copy_tree(from: &Path, to: &Path) -> Result<(), Refusal> {
    let failed = |_| Refusal::internal();
    fs::DirBuilder::new().mode(0o700).create(to).map_err(failed)?;
    for entry in fs::read_dir(from).map_err(failed)?.flatten() {
        let meta = entry.path().symlink_metadata().map_err(failed)?;
        let target = to.join(entry.file_name());
        if meta.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if meta.is_file() {
            let mode = 0o600 | (meta.permissions().mode() & 0o100);
            let mut out = fs::OpenOptions::new()
                .create_new(true)
                .write(true)
                .mode(mode)
                .open(&target)
                .map_err(failed)?;
            std::io::copy(&mut fs::File::open(entry.path()).map_err(failed)?, &mut out).map_err(failed)?;
        } else {
            return Err(Refusal::new(
                ErrorCode::InvalidManifest,
                "the package directory holds a symbolic link or a special file; packages hold regular files only",
            ));
        }
    }
    Ok(())
}

fn internal(e: conduit_store::StoreError) -> Refusal {
    tracing::error!(error = %e, "storage failure");
    Refusal::internal()
}

/// The handler of a registration made only to check names: never called.
struct NotLoaded;

impl Handler for NotLoaded {
    fn call(&self, _: HandlerCall) -> HandlerFuture {
        Box::pin(async {
            Err(OperationError {
                code: "operation_failed".into(),
                message: "the package is not loaded".into(),
            })
        })
    }
}
