-- datasets/notmnist.lua: image OOD test set: a notMNIST test sample (Y. Bulatov), letters A-J
-- in idx format, from HYDRA_DATA_DIR. Labels are -1 (OOD); the letter (0 = A) is kept in
-- /test/orig_labels.
local data = require("hydra.data")

local SRC = "https://github.com/davidflanagan/notMNIST-to-MNIST " ..
  "@17823f4d4a3acd8317c07866702d2eb2ac79c7a0"

return {
  name = "notmnist",
  role = "image-ood",
  kind = "image",
  licence = "notMNIST by Yaroslav Bulatov (research use); conversion repository MIT",
  description = "notMNIST test sample, 10,000 letters A-J in many fonts, as OOD for Fashion-MNIST",
  inputs = {
    { name = "images", from = "data_dir", file = "notmnist/t10k-images-idx3-ubyte.gz",
      sha256 = "70ae9e06201f2827e5b0a3781a3169d735dd2efc69996b9eeaee7f10ed4044d7",
      source = SRC .. " t10k-images-idx3-ubyte.gz" },
    { name = "labels", from = "data_dir", file = "notmnist/t10k-labels-idx1-ubyte.gz",
      sha256 = "1fa03836e01c862542f8eb83463bb951bebec6fcb3efa28dad748c6b38a9021b",
      source = SRC .. " t10k-labels-idx1-ubyte.gz" },
  },
  seed = 0,
  prepare = data.prepare_idx_ood,
}
