//! The controls panel: policy, its parameters, k and the first stage, the ledger export, and
//! the chat model that answers.

use scar_retrieve::FirstStage;

use crate::worker::Pick;
use crate::{Controls, PolicyKind, ScarApp};

impl ScarApp {
    pub(crate) fn controls_ui(&mut self, ui: &mut egui::Ui) {
        ui.add_space(6.0);
        ui.heading("Controls");
        let mut controls = self.settings.controls;
        policy_ui(ui, &mut controls);
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
        if ui
            .button("Paper settings")
            .on_hover_text("SCAR ±1 with λ = 0.1 and γ = 0.8 over 5 dense seeds")
            .clicked()
        {
            controls = Controls::default();
        }
        self.set_controls(controls);
        ui.separator();
        if ui
            .add_enabled(self.evidence.is_some(), egui::Button::new("Export ledger…"))
            .on_hover_text("Save every decision as JSON, as `scar search --json` prints it")
            .clicked()
        {
            self.pick(ui.ctx(), Pick::ExportPath);
        }
        ui.separator();
        ui.strong("Answer");
        ui.label("chat model");
        ui.add(
            egui::TextEdit::singleline(&mut self.settings.answer.model)
                .desired_width(f32::INFINITY),
        )
        .on_hover_text(
            "A GGUF chat model: a known name, a .gguf file or folder, or org/repo:file.gguf",
        );
        ui.add(
            egui::DragValue::new(&mut self.settings.answer.max_tokens)
                .range(1..=4096)
                .prefix("max tokens "),
        );
    }
}

fn policy_ui(ui: &mut egui::Ui, controls: &mut Controls) {
    ui.strong("Policy");
    ui.weak("Changes apply at once, on the cached seeds.");
    egui::ComboBox::from_label("expansion")
        .selected_text(controls.policy.label())
        .show_ui(ui, |ui| {
            for kind in PolicyKind::ALL {
                ui.selectable_value(&mut controls.policy, kind, kind.label());
            }
        });
    let scar = controls.policy == PolicyKind::Scar;
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
    let windowed = matches!(controls.policy, PolicyKind::Scar | PolicyKind::StaticWindow);
    ui.add_enabled(
        windowed,
        egui::Slider::new(&mut controls.window, 0..=3).text("window ±"),
    );
    ui.add_enabled(
        controls.policy == PolicyKind::Parent,
        egui::Slider::new(&mut controls.parent_block, 1..=16).text("block"),
    )
    .on_hover_text("Chunks per block in documents without headings");
}
