//! [`create_sharded`]: a store whose chunks live on shard servers, behind a coordinator that
//! holds its files and documents and reaches the shards through `postgres_fdw`.
//!
//! The coordinator's `scar_chunks` is hash-partitioned by document, one foreign partition per
//! shard, so that a document's chunks (a seed and all its neighbours) are on one shard, and
//! every query of the store runs on the coordinator unchanged: PostgreSQL sends each shard its
//! part (the vector and full-text operators included, pgvector being named as a shippable
//! extension) and merges the ordered answers. The coordinator hands out the chunk ids; each
//! shard keeps its keys and its full-text index. Writers and readers name the coordinator
//! only.
//!
//! A file's transaction spans the coordinator and its shards. `postgres_fdw` commits the
//! shards' parts just before the coordinator's own, without two-phase commit, so a coordinator
//! that fails in that instant can leave a shard holding chunks of a document it never
//! recorded: a production deployment shards with Citus or a managed service instead, which
//! commit across nodes as one.

use std::fmt::Write as _;
use std::str::FromStr;

use postgres::config::Host;
use scar_embed::ModelInfo;
use scar_index::ChunkerConfig;

use crate::schema::{self, ChunksLayout};
use crate::store::connect;
use crate::{Result, StoreError, redacted};

/// Creates, in the empty database at `coordinator`, a store for chunks of `model` cut by
/// `chunker` whose chunks live on `shards` (two or more empty databases with pgvector, each
/// reachable from the coordinator's server at its URL). A coordinator that already holds the
/// same sharded store is left as it is.
pub fn create_sharded(
    coordinator: &str,
    shards: &[String],
    model: &ModelInfo,
    chunker: &ChunkerConfig,
) -> Result<()> {
    let refused = |reason: String| StoreError::Shards {
        url: redacted(coordinator),
        reason,
    };
    if shards.len() < 2 {
        return Err(refused("name two shard servers or more".to_owned()));
    }
    let named: Vec<String> = shards.iter().map(|shard| redacted(shard)).collect();
    let failed = |e| StoreError::from_client(coordinator, e);
    let mut client = connect(coordinator)?;
    let mut transaction = client.transaction().map_err(failed)?;
    schema::lock(&mut transaction, coordinator)?;
    if schema::version(&mut transaction, coordinator)?.is_some() {
        let meta = schema::existing(&mut transaction, coordinator)?;
        return if meta.shards == named {
            Ok(())
        } else {
            Err(refused(format!(
                "it already holds a store, on {}",
                if meta.shards.is_empty() {
                    "its own server".to_owned()
                } else {
                    meta.shards.join(", ")
                }
            )))
        };
    }
    for shard in shards {
        create_shard(shard, model.dimension)?;
    }
    schema::ensure_vector(&mut transaction, coordinator)?;
    let mut ddl = String::from("CREATE EXTENSION IF NOT EXISTS postgres_fdw;");
    for (at, shard) in shards.iter().enumerate() {
        ddl.push_str(&foreign_server(at, shard)?);
    }
    ddl.push_str(schema::FILES_AND_DOCUMENTS);
    ddl.push_str(schema::TERMS);
    ddl.push_str(&schema::chunks_table(
        model.dimension,
        ChunksLayout::Partitioned,
    ));
    for at in 0..shards.len() {
        let _ = write!(
            ddl,
            "CREATE FOREIGN TABLE scar_chunks_{at} PARTITION OF scar_chunks \
             FOR VALUES WITH (MODULUS {count}, REMAINDER {at}) \
             SERVER scar_shard_{at} OPTIONS (table_name 'scar_chunks');",
            count = shards.len()
        );
    }
    transaction.batch_execute(&ddl).map_err(failed)?;
    schema::create_records(&mut transaction, coordinator, model, chunker)?;
    schema::record(&mut transaction, coordinator, "shards", &named)?;
    transaction.commit().map_err(failed)
}

/// Creates one shard's part of the chunks table in the empty database at `url`.
fn create_shard(url: &str, dimension: usize) -> Result<()> {
    let failed = |e| StoreError::from_client(url, e);
    let mut client = connect(url)?;
    let mut transaction = client.transaction().map_err(failed)?;
    schema::ensure_vector(&mut transaction, url)?;
    let taken: bool = transaction
        .query_one("SELECT to_regclass('scar_chunks') IS NOT NULL", &[])
        .map_err(failed)?
        .get(0);
    if taken {
        return Err(StoreError::Shards {
            url: redacted(url),
            reason: "it already holds SCAR chunks; give each store empty shard databases"
                .to_owned(),
        });
    }
    transaction
        .batch_execute(&schema::chunks_table(dimension, ChunksLayout::Shard))
        .map_err(failed)?;
    transaction.commit().map_err(failed)
}

/// The foreign server `scar_shard_{at}` for the shard at `url`, and the coordinator user's
/// mapping to the shard's user (with its password, which the coordinator keeps in its catalog
/// as `postgres_fdw` does).
fn foreign_server(at: usize, url: &str) -> Result<String> {
    let config = postgres::Config::from_str(url).map_err(|e| StoreError::from_client(url, e))?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut server = vec![
        ("host", host),
        ("port", port.to_string()),
        ("extensions", "vector".to_owned()),
    ];
    if let Some(dbname) = config.get_dbname() {
        server.push(("dbname", dbname.to_owned()));
    }
    let mut mapping = Vec::new();
    if let Some(user) = config.get_user() {
        mapping.push(("user", user.to_owned()));
    }
    if let Some(password) = config.get_password() {
        mapping.push(("password", String::from_utf8_lossy(password).into_owned()));
    }
    Ok(format!(
        "CREATE SERVER scar_shard_{at} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({});
         CREATE USER MAPPING FOR CURRENT_USER SERVER scar_shard_{at} OPTIONS ({});",
        options(&server),
        options(&mapping)
    ))
}

/// `OPTIONS` entries: each value a quoted literal.
fn options(entries: &[(&str, String)]) -> String {
    entries
        .iter()
        .map(|(key, value)| format!("{key} {}", literal(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `value` as an SQL string literal (standard strings: only the quote is special).
fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_s_address_becomes_server_and_mapping_options() {
        let ddl = foreign_server(1, "postgres://ann:it's@db-2.example:6432/shard").unwrap();
        assert!(
            ddl.contains(
                "CREATE SERVER scar_shard_1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS \
                 (host 'db-2.example', port '6432', extensions 'vector', dbname 'shard')"
            ),
            "{ddl}"
        );
        assert!(
            ddl.contains("SERVER scar_shard_1 OPTIONS (user 'ann', password 'it''s')"),
            "{ddl}"
        );
    }
}
