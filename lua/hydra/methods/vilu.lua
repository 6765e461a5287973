-- lua/hydra/methods/vilu.lua: ViLU-style error predictor = the Single model (the base model,
-- frozen) plus a small MLP trained to predict the Single's own errors (Lafon et al., "ViLU",
-- 2025; core/hydra/vilu.h, hydra.vilu): input [z, w_pred, z * w_pred] (z = the CLS row after the final
-- LayerNorm, w_pred = the classifier row of the predicted class, our analog of ViLU's text
-- embedding of the predicted class), class-balanced weighted BCE on "misclassified", trained on
-- the ID split vilu.split (default val; never a test split). Predictions are the Single's; the
-- uncertainty score (score "learned") is the head's output. Interface: lua/hydra/methods/common.lua.
return require("hydra.methods.common").head_module("vilu", "ViLU-style head")
