-- lua/hydra/text.lua: what the text dataset recipes (datasets/<name>.lua, kind "text") share.
-- Reading (C readers; bad input raises a clean user error naming file and line), the common
-- HDF5 schema (DESIGN.md §5), the ID vocabulary (built from the sst2 train split, copied into
-- every text file) and the /meta every text file carries. Per-record work is C (core/data/textnorm.c,
-- corpus.c, vocab.c).
--
-- Schema written by write_split(out, split, corpus, vocab):
--   /<split>/ids int32 [N, MAX_LEN]   word ids, PAD (0) after lengths[i]; no CLS stored
--   /<split>/lengths int32 [N]        tokens kept (<= MAX_LEN)
--   /<split>/labels int16 [N]         class, or -1 for OOD sets
--   /<split>/text uint8 [bytes] + /<split>/text_offsets int64 [N+1]   record i is
--                                     text[offsets[i] .. offsets[i+1]) (0-based), as read
--   /vocab string [V]                 the sst2 vocabulary, index = id
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

-- One max length for every text set (DESIGN.md §5: "same max length"); a schema constant.
M.MAX_LEN = 64
-- Vocabulary knobs of the ID set (sst2): words seen at least MIN_COUNT times in the train split,
-- so the UNK embedding is trained on the words seen once; no size cap.
M.MIN_COUNT = 2
M.MAX_SIZE = 0
M.RESERVED = core.text_reserved   -- { "[PAD]", "[UNK]", "[CLS]", "[MASK]" } = ids 0, 1, 2, 3
M.NORMALIZATION = core.text_normalization
M.TOKENS_NOTE = "ids hold word ids only (PAD 0 after lengths, UNK 1); the CLS token (id 2, "
  .. "[CLS]) is not stored: the model prepends its own cls token; [MASK] (id 3) occurs only in "
  .. "masked-language-model pretraining batches"

local function clean(fn, ...)
  return err.wrap(nil, fn, ...)
end

-- Readers: each returns a hydra.Corpus (raw + normalised records, labels). opts.news strips news
-- source/dateline prefixes and sign-offs before normalising (agnews, reuters).
-- spec: { ncols =, text = column (1-based), label = column or nil, header = bool, news = bool }
function M.read_tsv(path, spec) return clean(core.text_read_tsv, path, spec) end
-- opts: { label_prefix = bool (TREC: "DESC:manner How ..."), news = bool }
function M.read_lines(path, opts) return clean(core.text_read_lines, path, opts or {}) end
-- fortune(6) files: records separated by "%" lines
function M.read_records(path, opts) return clean(core.text_read_records, path, opts or {}) end
-- WordNet data files: each synset's definition and example sentences, one record each
function M.read_wordnet(path, opts) return clean(core.text_read_wordnet, path, opts or {}) end
-- opts: { attr = string attribute name (default: the first string attribute), news = bool }
function M.read_arff(path, opts) return clean(core.text_read_arff, path, opts or {}) end

-- Concatenates corpora (in order) into a new one.
function M.concat(list)
  local c = core.text_corpus_new()
  for _, x in ipairs(list) do c:append(x) end
  return c
end

-- Builds the ID vocabulary from a (train) corpus.
function M.build_vocab(corpus)
  return core.vocab_build(corpus, M.MIN_COUNT, M.MAX_SIZE)
end

-- Writes split `name` of corpus into the open h5 handle `out` (schema above); returns stats.
function M.write_split(out, name, corpus, vocab)
  local ids, lengths, st = vocab:encode(corpus, M.MAX_LEN)
  local bytes, offsets = corpus:text()
  local g = "/" .. name
  out:write(g .. "/ids", ids)
  out:write(g .. "/lengths", lengths)
  out:write(g .. "/labels", corpus:labels())
  out:write(g .. "/text", bytes)
  out:write(g .. "/text_offsets", offsets)
  st.unk_rate = st.tokens > 0 and st.unk / st.tokens or 0
  return st
end

function M.write_vocab(out, vocab)
  out:write_strings("/vocab", vocab:words())
end

-- The /meta every text file carries (besides what the framework writes: name, sources, sha256s,
-- licence, seed).
function M.meta(ctx, vocab, extra)
  ctx.meta("max_len", M.MAX_LEN)
  ctx.meta("vocab_size", vocab:size())
  ctx.meta("vocab_sha256", vocab:sha256())
  ctx.meta("vocab_min_count", M.MIN_COUNT)
  ctx.meta("normalization", M.NORMALIZATION)
  ctx.meta("tokens", M.TOKENS_NOTE)
  ctx.meta("pad_id", 0)
  ctx.meta("unk_id", 1)
  ctx.meta("cls_id", 2)
  ctx.meta("mask_id", 3)
  -- sorted: attribute creation order is part of the file's bytes (byte-identical re-prepares)
  local keys = {}
  for k in pairs(extra or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do ctx.meta(k, extra[k]) end
end

-- The ID vocabulary stored in a prepared text file (checked against its /meta vocab_sha256).
function M.load_vocab(path)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  local vocab = clean(core.vocab_from_words, f:read_strings("/vocab"))
  local want = f:attrs("/meta").vocab_sha256
  if want and want ~= vocab:sha256() then
    err.fail("text: vocabulary of '%s' does not match its /meta vocab_sha256 (%s vs %s)",
             path, vocab:sha256(), want)
  end
  return vocab
end

-- A corpus rebuilt from split `split` of a prepared text file (raw text re-normalised).
function M.load_corpus(path, split)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  local g = "/" .. split
  return core.text_corpus(f:read(g .. "/text"), f:read(g .. "/text_offsets"), f:read(g .. "/labels"))
end

local function log_stats(ctx, name, s)
  ctx.log(("%s: %d records, %d tokens, UNK %.2f%%, %d truncated at %d tokens"):format(
    name, s.n, s.tokens, 100 * s.unk_rate, s.truncated, M.MAX_LEN))
end
M.log_stats = log_stats

-- The common path of every non-ID text set (OOD test, OOD validation, shift): drops records
-- that normalise to nothing and (unless opts.dedup == false) exact duplicates after
-- normalisation, optionally draws a seeded sample of opts.sample records (original order kept),
-- and writes split opts.split (default "test") with sst2's vocabulary.
--   opts: { split =, sample =, dedup =, exclude = corpus, meta = { extra /meta attributes } }
function M.prepare_other(ctx, corpus, opts)
  opts = opts or {}
  local split = opts.split or "test"
  local vocab = M.load_vocab(ctx.prepared("sst2"))
  local dedup = opts.dedup ~= false
  local kept, dropped = corpus:filter({ dedup = dedup, exclude = opts.exclude })
  if dropped > 0 then
    ctx.log(("dropped %d of %d records (empty after normalisation%s%s)"):format(
      dropped, corpus:size(), dedup and ", duplicates" or "",
      opts.exclude and ", or in the excluded set" or ""))
  end
  if opts.sample then
    if kept:size() < opts.sample then
      err.fail("text: %s has %d usable records, fewer than the %d to sample", ctx.name or "set",
               kept:size(), opts.sample)
    end
    local _, held = kept:split(opts.sample, ctx.seed, false)
    kept = held
  end
  local s = M.write_split(ctx.out, split, kept, vocab)
  log_stats(ctx, split, s)
  M.write_vocab(ctx.out, vocab)
  local extra = { vocab_source = "sst2", records_dropped = dropped }
  for k, v in pairs(opts.meta or {}) do extra[k] = v end
  extra["n_" .. split] = s.n
  extra["unk_rate_" .. split] = s.unk_rate
  M.meta(ctx, vocab, extra)
  return kept
end

-- prepare() of a UCI labelled-sentences shift set (input "test": sentence<TAB>label, 0 negative,
-- 1 positive as in SST-2): every sentence is kept (duplicates too), empty ones dropped.
function M.prepare_uci_sentences(ctx)
  local c = M.read_tsv(ctx.input("test"), { ncols = 2, text = 1, label = 2 })
  M.prepare_other(ctx, c, { dedup = false,
                            meta = { label_names = "0 negative, 1 positive", n_classes = 2 } })
end

return M
