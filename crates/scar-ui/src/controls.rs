//! The controls panel: policy, its parameters, k and the first stage, the ledger export, and
//! the chat model that answers.

use scar_policy::PolicyKind;
use scar_retrieve::{FirstStage, RANKING_DEPTH_PER_SEED};

use crate::{AnswerSettings, Controls};

/// The deepest evidence walk the prepared rankings can serve (they reach
/// [`RANKING_DEPTH_PER_SEED`] × k, enough for a depth of half that).
const MAX_DEPTH: u32 = RANKING_DEPTH_PER_SEED as u32 / 2;

/// The controls panel, changing `controls` and `answer` in place; true when the user asked to
/// export the ledger (offered when `can_export`).
pub(crate) fn controls_ui(
    ui: &mut egui::Ui,
    controls: &mut Controls,
    answer: &mut AnswerSettings,
    can_export: bool,
) -> bool {
    ui.add_space(6.0);
    ui.heading("Controls");
    policy_ui(ui, controls);
    ui.separator();
    ui.strong("Seeds");
    ui.weak("Changing these embeds the question again.");
    ui.add(egui::Slider::new(&mut controls.k, 1..=20).text("k"));
    ui.horizontal(|ui| {
        for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
            ui.radio_value(&mut controls.first_stage, stage, stage.to_string());
        }
    });
    ui.separator();
    ui.horizontal(|ui| {
        let defaults = Controls::default();
        if ui
            .button("Defaults")
            .on_hover_text(format!(
                "{} over {} {} seeds",
                defaults.policy(),
                defaults.k,
                defaults.first_stage
            ))
            .clicked()
        {
            *controls = defaults;
        }
        let paper = Controls {
            first_stage: FirstStage::Dense,
            ..defaults.with_policy(PolicyKind::Scar)
        };
        if ui
            .button("Paper's SCAR")
            .on_hover_text(format!(
                "{} over {} {} seeds, as the paper ran it",
                paper.policy(),
                paper.k,
                paper.first_stage
            ))
            .clicked()
        {
            *controls = paper;
        }
    });
    ui.separator();
    let export = ui
        .add_enabled(can_export, egui::Button::new("Export ledger…"))
        .on_hover_text("Save every decision as JSON, as `scar search --json` prints it")
        .clicked();
    ui.separator();
    ui.strong("Answer");
    ui.label("chat model");
    ui.add(egui::TextEdit::singleline(&mut answer.model).desired_width(f32::INFINITY))
        .on_hover_text(
            "A GGUF chat model: a known name, a .gguf file or folder, or org/repo:file.gguf",
        );
    ui.add(
        egui::DragValue::new(&mut answer.max_tokens)
            .range(1..=4096)
            .prefix("max tokens "),
    );
    export
}

/// The policy menu, each kind named as it would run, and the parameters the chosen kind reads.
fn policy_ui(ui: &mut egui::Ui, controls: &mut Controls) {
    ui.strong("Policy");
    ui.weak("Changes apply at once, on the cached seeds.");
    let mut kind = controls.policy;
    egui::ComboBox::from_label("rule")
        .width(ui.available_width() - 40.0)
        .selected_text(controls.policy().to_string())
        .show_ui(ui, |ui| {
            for option in PolicyKind::ALL {
                let name = controls.with_policy(option).policy().to_string();
                ui.selectable_value(&mut kind, option, name);
            }
        });
    if kind != controls.policy {
        *controls = controls.with_policy(kind);
    }
    let is = |kinds: &[PolicyKind]| kinds.contains(&controls.policy);
    let scar = is(&[PolicyKind::Scar]);
    ui.add_enabled(
        is(&[PolicyKind::Evidence]),
        egui::Slider::new(&mut controls.depth, 1..=MAX_DEPTH).text("depth ×k"),
    )
    .on_hover_text(
        "The evidence walk's bar: a neighbour joins when its dense and BM25 ranks, fused, beat \
         a chunk ranked depth × k in both (and in the better half of the chunks searched)",
    );
    ui.add_enabled(
        scar,
        egui::Slider::new(&mut controls.lambda, 0.0..=0.5).text("λ"),
    )
    .on_hover_text("Weight of the continuity penalty b = 1 − cos(c, n)");
    ui.add_enabled(
        scar,
        egui::Slider::new(&mut controls.gamma, 0.05..=0.99).text("γ"),
    )
    .on_hover_text("The bar: a neighbour joins when S > γ·cos(q, c)");
    ui.add_enabled(
        controls.policy.walks(),
        egui::Slider::new(&mut controls.window, 0..=3).text("window ±"),
    );
    ui.add_enabled(
        is(&[PolicyKind::Parent, PolicyKind::Section]),
        egui::Slider::new(&mut controls.block, 1..=16).text("block"),
    )
    .on_hover_text("Chunks per parent block, and per section in documents without headings");
}
