/* hydra.h: umbrella header of the C core (everything a C program embedding hydra needs).
 * core/README.md has the file map (one concept per file) and the glossary of dimension letters
 * used in every shape comment of core/ (B batch, T tokens, D width, K classes, M members, ...). */
#ifndef HY_HYDRA_H
#define HY_HYDRA_H

#include "tensor/arena.h"
#include "tensor/attn.h"
#include "tensor/base.h"
#include "nn/ckpt.h"
#include "io/config.h"
#include "data/corrupt.h"
#include "hydra/fused.h"
#include "tensor/gemm.h"
#include "data/glyph.h"
#include "io/h5.h"
#include "io/hash.h"
#include "data/idx.h"
#include "data/imgio.h"
#include "nn/layers.h"
#include "data/loader.h"
#include "eval/metrics.h"
#include "nn/mlm.h"
#include "hydra/mimo.h"
#include "nn/optim.h"
#include "hydra/prune.h"
#include "tensor/rng.h"
#include "data/sample.h"
#include "io/safetensors.h"
#include "tensor/tensor.h"
#include "data/text.h"
#include "nn/train.h"
#include "nn/xfmr.h"

#endif
