-- datasets/mnist.lua: image OOD test set: the MNIST test split (LeCun & Cortes), from
-- HYDRA_DATA_DIR. Labels are -1 (OOD); the digit is kept in /test/orig_labels.
local data = require("hydra.data")

local SRC = "http://yann.lecun.com/exdb/mnist/ (mirror: github.com/YashDagade/ECE-685-Fall-2024 " ..
  "@262271296eec75f43d1d97f9725325ff95b586fd 'Homework 1/data/MNIST/raw/')"

return {
  name = "mnist",
  role = "image-ood",
  kind = "image",
  licence = "CC BY-SA 3.0 (as commonly cited)",
  description = "MNIST test split, 10,000 handwritten digits, as OOD for Fashion-MNIST",
  inputs = {
    { name = "images", from = "data_dir", file = "mnist/t10k-images-idx3-ubyte.gz",
      sha256 = "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
      source = SRC .. " t10k-images-idx3-ubyte.gz" },
    { name = "labels", from = "data_dir", file = "mnist/t10k-labels-idx1-ubyte.gz",
      sha256 = "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
      source = SRC .. " t10k-labels-idx1-ubyte.gz" },
  },
  seed = 0,
  prepare = data.prepare_idx_ood,
}
