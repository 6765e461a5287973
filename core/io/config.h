/* config.h: YAML (libyaml) -> an ordered tree of nodes with 1-based positions; no Lua here.
 * Entry points: hy_config_parse / hy_config_load build a hy_config_doc, hy_config_free frees it;
 * hy_config_find / hy_config_get walk it; hy_config_get_int/_float/_bool/_str read typed leaves.
 * Plain scalars are typed like the YAML 1.2 core schema (null, bool, int, float, else string);
 * quoted, block and !!str scalars are strings. Validation against configs/defaults.yaml (unknown
 * keys, types, ranges) lives in lua/hydra/config.lua; this file checks only what YAML itself
 * can say: syntax, duplicate keys, scalar keys, one document, no aliases, nesting depth. */
#ifndef HY_CONFIG_H
#define HY_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/base.h"

/* Deepest nesting of sequences and mappings accepted (the root mapping is level 1). */
#define HY_CONFIG_MAXDEPTH 64
/* Largest config file hy_config_load reads (64 MiB; /dev/zero is refused, not read forever). */
#define HY_CONFIG_MAXBYTES ((size_t)64 << 20)

typedef enum {
    HY_CONFIG_NULL = 0,  /* ~, null, Null, NULL, empty plain scalar, or an empty file */
    HY_CONFIG_BOOL,      /* true/True/TRUE/false/False/FALSE */
    HY_CONFIG_INT,       /* [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+ (fits int64) */
    HY_CONFIG_FLOAT,     /* [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)?, .inf, .nan */
    HY_CONFIG_STR,       /* any other scalar, and every non-plain one */
    HY_CONFIG_SEQ,
    HY_CONFIG_MAP
} hy_config_kind;

typedef enum {
    HY_CONFIG_PLAIN = 0, /* scalars */
    HY_CONFIG_SINGLE_QUOTED,
    HY_CONFIG_DOUBLE_QUOTED,
    HY_CONFIG_LITERAL,   /* | */
    HY_CONFIG_FOLDED,    /* > */
    HY_CONFIG_BLOCK,     /* sequences and mappings */
    HY_CONFIG_FLOW
} hy_config_style;

typedef struct hy_config_node {
    hy_config_kind kind;
    hy_config_style style;
    int64_t line, col;            /* 1-based position of the node's first character */
    char *text;                   /* scalars: the value text (escapes resolved), NUL-terminated;
                                     NULL for sequences and mappings */
    size_t len;                   /* strlen-independent length of text (may hold NUL bytes) */
    int64_t i;                    /* HY_CONFIG_INT value; HY_CONFIG_BOOL: 0 or 1 */
    double f;                     /* HY_CONFIG_FLOAT value */
    size_t n;                     /* SEQ: number of items; MAP: number of key/value pairs */
    struct hy_config_node *items; /* SEQ: n nodes; MAP: 2n nodes, key0 val0 key1 val1 ...
                                     (keys are scalars, in file order, pairwise distinct) */
} hy_config_node;

typedef struct hy_config_doc {
    hy_config_node root;          /* HY_CONFIG_NULL at 1:1 for an empty file */
    char *name;                   /* file name used in messages (owned) */
} hy_config_doc;

/* Parses `len` bytes of YAML text into doc (which must be zeroed or freed); `name` is the file
 * name used in messages ("command line" for overrides). Returns owned memory in doc; free it
 * with hy_config_free. On failure doc is left zeroed and the message reads "name:line:col: what",
 * for example "x.yaml:4:6: did not find expected ',' or ']' (while parsing a flow sequence)":
 *   HY_ECONFIG  malformed YAML, duplicate key ("duplicate key 'k' in 'a.b' (first at 3:3)"),
 *               non-scalar key, several documents, an alias, an unsupported tag, nesting deeper
 *               than HY_CONFIG_MAXDEPTH, an integer or float out of range
 * Duplicate keys are found with a hash set per mapping: parsing is linear in the input.
 *   HY_ENOMEM   out of memory */
hy_status hy_config_parse(hy_config_doc *doc, const char *text, size_t len, const char *name);

/* Reads the file at path and parses it (name = path). HY_EIO "config: cannot read 'p' (why)";
 * HY_ECONFIG "config: 'p' is larger than 64 MiB, the limit for a config file". */
hy_status hy_config_load(hy_config_doc *doc, const char *path);

/* Frees everything doc owns and zeroes it; a zeroed doc is fine (idempotent). */
void hy_config_free(hy_config_doc *doc);

/* The value stored under `key` in mapping `map`, or NULL (also when map is not a mapping). */
const hy_config_node *hy_config_find(const hy_config_node *map, const char *key);

/* The node at dotted path "a.b.c" below root (each part a mapping key), or NULL. */
const hy_config_node *hy_config_get(const hy_config_node *root, const char *path);

/* Typed reads of the leaf at a dotted path. They fail with HY_ECONFIG and a message naming the
 * document and position: "x.yaml:5:12: train.epochs: expected integer, got string 'ten'", or
 * "x.yaml: missing key 'train.epochs'". get_float accepts integers too. get_str borrows: *out
 * points into doc and lives as long as doc. */
hy_status hy_config_get_int(const hy_config_doc *doc, const char *path, int64_t *out);
hy_status hy_config_get_float(const hy_config_doc *doc, const char *path, double *out);
hy_status hy_config_get_bool(const hy_config_doc *doc, const char *path, int *out);
hy_status hy_config_get_str(const hy_config_doc *doc, const char *path, const char **out);

/* "null", "boolean", "integer", "float", "string", "list", "map". */
const char *hy_config_kind_name(hy_config_kind kind);

#endif
