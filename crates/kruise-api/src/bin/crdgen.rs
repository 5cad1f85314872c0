//! Writes the CRD of every kind to `deploy/crds/<plural>.<group>.yaml`.
//!
//! Usage: `crdgen [DIR]` (default `deploy/crds`). Files of kinds that no longer exist
//! are removed, so the directory always equals the types.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "deploy/crds".into()),
    );
    std::fs::create_dir_all(&dir)?;
    let crds = kruise_api::all_crds();
    let wanted: Vec<String> = crds.iter().map(kruise_api::crd_file_name).collect();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if name.ends_with(".yaml") && !wanted.contains(&name) {
            std::fs::remove_file(&path)?;
        }
    }
    for crd in &crds {
        let path = dir.join(kruise_api::crd_file_name(crd));
        std::fs::write(&path, kruise_api::crd_yaml(crd))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
