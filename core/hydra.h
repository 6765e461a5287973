/* hydra.h: umbrella header of the C core (everything a C program embedding hydra needs).
 * core/README.md has the file map (one concept per file) and the glossary of dimension letters
 * used in every shape comment of core/ (B batch, T tokens, D width, K classes, M members, ...). */
#ifndef HY_HYDRA_H
#define HY_HYDRA_H

#include "arena.h"
#include "attn.h"
#include "base.h"
#include "ckpt.h"
#include "config.h"
#include "corrupt.h"
#include "fused.h"
#include "gemm.h"
#include "glyph.h"
#include "h5.h"
#include "hash.h"
#include "idx.h"
#include "imgio.h"
#include "layers.h"
#include "loader.h"
#include "metrics.h"
#include "mlm.h"
#include "mimo.h"
#include "optim.h"
#include "prune.h"
#include "rng.h"
#include "sample.h"
#include "tensor.h"
#include "text.h"
#include "train.h"
#include "xfmr.h"

#endif
