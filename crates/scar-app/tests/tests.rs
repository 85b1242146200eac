//! `scar-app` as a user starts it: its flags, and a real window under Xvfb.
#![allow(clippy::unwrap_used)]

mod fonts;
mod screenshot;
