//! Installed packages on this daemon: install (read the manifest, pass the RFC 0076 gate, check
//! the names against the release and every other package, copy the package into
//! `<state>/packages/<name>/`, record it), list, show and remove. A package's status is judged
//! against the current grant set at every read: while the grant no longer covers what it requires,
//! it is flagged `requirement_unmet`.

mod host;
mod installed;
mod runtime;

pub use host::PackageHost;
pub use installed::{installed_manifests, names_only};

use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use conduit_config::CurrentConfig;
use conduit_core::requires::unmet_now;
use conduit_core::{ErrorCode, Refusal};
use conduit_packages::gate;
use conduit_packages::Manifest;
use conduit_server::{now, PackageControl};
use conduit_store::{PackageRecord, Store};
use conduit_toolbelt::registry::lost_operations;
use serde_json::{json, Value};

use crate::state::create_private_dir;
use installed::{check_to_install, invalid, manifest_to_install, open_regular, read_manifest};

pub struct PackageService {
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    /// `<state>/packages`: each installed package's copy.
    pub dir: PathBuf,
    /// Serves what is installed: reloaded after every install and removal.
    pub host: Arc<PackageHost>,
}

impl PackageControl for PackageService {
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

    fn show(&self, name: &str) -> Result<Value, Refusal> {
        let record = self.store.read(|tx| tx.get_package(name)).map_err(internal)?;
        record
            .map(|r| self.listing(&r))
            .ok_or_else(|| Refusal::not_found("package"))
    }

    fn judge(&self, manifest: &[u8], grant: &[String], gating: bool) -> Result<(String, Vec<String>), Refusal> {
        let manifest = manifest_to_install(manifest)?;
        gate::check(&manifest, grant, gating)?;
        Ok((manifest.id(), manifest.runtime.requires))
    }

    fn install(&self, dir: &str) -> Result<Value, Refusal> {
        let source = Path::new(dir);
        if !source.is_absolute() {
            return Err(Refusal::invalid_input(
                "`dir` is an absolute path to the package directory",
            ));
        }
        create_private_dir(&self.dir).map_err(|_| Refusal::internal())?;
        let staging = self.dir.join(format!(".staging.{}", uuid::Uuid::now_v7()));
        let installed = self.install_staged(source, &staging);
        if installed.is_err() {
            let _ = fs::remove_dir_all(&staging);
        }
        installed
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
    /// The package's names against the release and every other installed package: the toolbelt's
    /// registration rules (namespace, conflicts, no exec tier) decide.
    fn check_names(&self, manifest: &Manifest) -> Result<(), Refusal> {
        let others = installed_manifests(&self.dir)
            .iter()
            .filter(|m| m.name != manifest.name)
            .map(names_only)
            .collect();
        let mut registry = crate::extensions::registry_with(None, others);
        registry.register(names_only(manifest)).map_err(|e| {
            let code = if e.code == "conflict" {
                ErrorCode::Conflict
            } else {
                ErrorCode::InvalidManifest
            };
            Refusal::new(code, format!("{}: {}", e.operation, e.reason))
        })
    }

    /// A new version of an installed package keeps every operation each of its toolsets had (with
    /// the release it joined in): a grant that names the toolset never loses what it granted.
    fn check_toolsets_only_gain(&self, manifest: &Manifest) -> Result<(), Refusal> {
        let Some(installed) = installed_manifests(&self.dir)
            .into_iter()
            .find(|m| m.name == manifest.name)
        else {
            return Ok(());
        };
        let lost = lost_operations(&names_only(&installed).toolsets, &names_only(manifest).toolsets);
        if lost.is_empty() {
            return Ok(());
        }
        Err(invalid(&format!(
            "a toolset only gains operations; this version drops or re-dates {}",
            lost.join(", ")
        )))
    }

    /// Copies the package (owner-only) into `staging` first and checks the copy, so what is
    /// approved is exactly what runs; then it replaces `<state>/packages/<name>/` whole.
    fn install_staged(&self, source: &Path, staging: &Path) -> Result<Value, Refusal> {
        fs::read_dir(source).map_err(|_| invalid("the package directory cannot be read"))?;
        // Before the copy, so a directory that is no package is not judged by what else it holds.
        read_manifest(source)?;
        copy_tree(source, staging)?;
        let manifest = read_manifest(staging)?;
        check_to_install(&manifest)?;
        let config = self.config.get();
        let approval = gate::check(&manifest, &config.package_grant(), config.package_gating())?;
        self.check_names(&manifest)?;
        self.check_toolsets_only_gain(&manifest)?;
        check_entry(staging, &manifest)?;
        let target = self.dir.join(&manifest.name);
        let _ = fs::remove_dir_all(&target);
        fs::rename(staging, &target).map_err(|_| Refusal::internal())?;
        let record = PackageRecord {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            manifest: serde_json::to_string(&manifest).map_err(|_| Refusal::internal())?,
            approved_grant: approval.grant,
            approved_gating: approval.gating,
            installed_at: now(),
        };
        self.store.write(|tx| tx.put_package(&record)).map_err(internal)?;
        self.host.reload_replacing(Some(&record.name));
        Ok(self.listing(&record))
    }
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
            let mut from = open_regular(&entry.path()).map_err(|_| special(&entry.file_name()))?;
            std::io::copy(&mut from, &mut out).map_err(failed)?;
        } else {
            return Err(special(&entry.file_name()));
        }
    }
    Ok(())
}

/// `name` is the entry's own name, never the path it sits at.
fn special(name: &std::ffi::OsStr) -> Refusal {
    invalid(&format!(
        "the package directory holds a symbolic link or a special file ({}); packages hold regular files only",
        name.to_string_lossy()
    ))
}

fn internal(e: conduit_store::StoreError) -> Refusal {
    tracing::error!(error = %e, "storage failure");
    Refusal::internal()
}
