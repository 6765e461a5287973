/* hydra.h: umbrella header of the C core (everything a C program embedding hydra needs) and the
 * glossary of dimension letters used in every shape comment of core/.
 *
 *   B    batch size (samples in one forward)
 *   T    tokens per sequence, CLS included (vit: 1 + NP; text: 1 + tokens of the batch)
 *   NP   patches per image, (S / p)^2
 *   S    image side (image_size); p: patch side; Cin: input channels
 *   F    flattened patch length, Cin * p * p
 *   C, D model width d_model (C in attention contracts, as in llm.c; D elsewhere)
 *   NH   attention heads per layer; HS head size, D / NH
 *   DM   MLP hidden width (d_mlp)
 *   L    depth (number of blocks)
 *   K    classes (n_classes)
 *   V    vocabulary size (text)
 *   M    ensemble members (fused Hydra model)
 *   N    rows of a 2-d kernel (usually B * T)
 * Tensors are row-major; "(B, T, D)" means D is contiguous. Weights are PyTorch [out, in].
 * Layer and head numbers are 0-based in C, 1-based in Lua, YAML and every user message. */
#ifndef HY_HYDRA_H
#define HY_HYDRA_H

#include "arena.h"
#include "attn.h"
#include "base.h"
#include "ckpt.h"
#include "config.h"
#include "fused.h"
#include "gemm.h"
#include "h5.h"
#include "layers.h"
#include "metrics.h"
#include "optim.h"
#include "prune.h"
#include "rng.h"
#include "tensor.h"
#include "train.h"
#include "xfmr.h"

#endif
