/*
 * tokenizer: GPT-2 byte-level BPE, done the way llama.cpp does it for
 * "gpt2" GGUF vocabularies so that the ids agree. Load interns every token
 * and merge string once; encoding then works on small integers: special
 * token partition, the PCRE2 pre-tokenizer chain, the byte map, and merges
 * in rank order from a binary heap. Detokenization uses a per-token cache.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "xalloc.h"

#include "text/utf8.h"

#define MAX_REGEX 3

/* ---- the GPT-2 byte map (bytes_to_unicode) ---- */

#define BYTE_CP_LIMIT 324 /* every mapped code point is below 256 + 68 */

/* byte_cp[b]: the code point byte b is written as; cp_byte[cp]: the inverse
 * (-1 for code points that are no byte's image). Printable Latin-1 maps to
 * itself; the other 68 bytes get 256, 257, ... in byte order. */
static void byte_map_init(uint16_t byte_cp[256], int16_t cp_byte[BYTE_CP_LIMIT])
{
    uint16_t next = 256;
    for (int cp = 0; cp < BYTE_CP_LIMIT; cp++)
        cp_byte[cp] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        byte_cp[b] = printable ? (uint16_t)b : next++;
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

/* ---- string interning: every token and merge string gets a small id ---- */

struct strtab {
    char *bytes;    /* owned arena; each string is followed by a NUL */
    size_t n_bytes; /* bytes used */
    size_t cap_bytes;
    uint32_t *off; /* [n] arena offset of string sid */
    uint32_t *len; /* [n] its length in bytes */
    size_t n, cap;
    uint32_t *slots; /* [n_slots] open addressing: sid + 1, 0 = empty */
    size_t n_slots;  /* a power of two, kept above 2 * n */
};

static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static void strtab_rehash(struct strtab *t, size_t n_slots)
{
    free(t->slots);
    t->slots = xcalloc(n_slots, sizeof(*t->slots));
    t->n_slots = n_slots;
    for (size_t sid = 0; sid < t->n; sid++) {
        size_t i = hash_bytes(t->bytes + t->off[sid], t->len[sid]) & (n_slots - 1);
        while (t->slots[i])
            i = (i + 1) & (n_slots - 1);
        t->slots[i] = (uint32_t)sid + 1;
    }
}

/* The slot where p[0..n) is or would go. */
static size_t strtab_slot(const struct strtab *t, const char *p, size_t n)
{
    size_t i = hash_bytes(p, n) & (t->n_slots - 1);
    for (;;) {
        uint32_t s = t->slots[i];
        if (!s || (t->len[s - 1] == n && memcmp(t->bytes + t->off[s - 1], p, n) == 0))
            return i;
        i = (i + 1) & (t->n_slots - 1);
    }
}

static int32_t strtab_find(const struct strtab *t, const char *p, size_t n)
{
    return (int32_t)t->slots[strtab_slot(t, p, n)] - 1;
}

/* The id of p[0..n), added if new. Returns -1 past the 4 GiB arena limit. */
static int32_t strtab_intern(struct strtab *t, const char *p, size_t n)
{
    size_t slot = strtab_slot(t, p, n);
    if (t->slots[slot])
        return (int32_t)t->slots[slot] - 1;
    if (t->n_bytes + n + 1 > UINT32_MAX || t->n >= INT32_MAX / 2)
        return -1;
    XGROW(t->bytes, t->cap_bytes, t->n_bytes + n + 1);
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->off = xrealloc(t->off, t->cap * sizeof(*t->off));
        t->len = xrealloc(t->len, t->cap * sizeof(*t->len));
    }
    memcpy(t->bytes + t->n_bytes, p, n);
    t->bytes[t->n_bytes + n] = '\0';
    t->off[t->n] = (uint32_t)t->n_bytes;
    t->len[t->n] = (uint32_t)n;
    t->n_bytes += n + 1;
    t->slots[slot] = (uint32_t)++t->n;
    if (2 * t->n >= t->n_slots)
        strtab_rehash(t, 2 * t->n_slots);
    return (int32_t)t->n - 1;
}

static void strtab_release(struct strtab *t)
{
    free(t->bytes);
    free(t->off);
    free(t->len);
    free(t->slots);
}

/* ---- pre-tokenizers, by tokenizer.ggml.pre (llama.cpp llama-vocab.cpp) ---- */

/* llama.cpp's whitespace set (Unicode White_Space), spelled out because
 * PCRE2's \s differs from it (U+0085) and needs PCRE2_UCP. */
#define WS                                                                                         \
    "\\t-\\r "                                                                                     \
    "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Letters and numbers that Unicode 15.0 and 15.1 added (Kawi, Nag Mundari,
 * Kaktovik numerals, CJK extensions H and I, ...). llama.cpp's tables have
 * them; PCRE2 before 10.43 (Unicode 14, Debian 12's) does not, so they are
 * listed: the split is then the same with either PCRE2. */
#define L_NEW                                                                                      \
    "\\x{1123F}-\\x{11240}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}"          \
    "\\x{13441}-\\x{13446}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}"          \
    "\\x{1E4D0}-\\x{1E4EB}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
#define N_NEW  "\\x{11F50}-\\x{11F59}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}"
#define LETTER "[\\p{L}" L_NEW "]"
#define NUMBER "[\\p{N}" N_NEW "]"
#define OTHER  "[^" WS "\\p{L}\\p{N}" L_NEW N_NEW "]"

/* The GPT-2 split. llama.cpp matches it with hand-written code that also
 * takes a lone whitespace character (the trailing \s+ of OpenAI's original). */
#define GPT2_RE                                                                                    \
    "'s|'t|'re|'ve|'m|'ll|'d| ?" LETTER "+| ?" NUMBER "+| ?" OTHER "+|[" WS "]+(?![^" WS "])|[" WS \
    "]+"

struct pre_def {
    const char *names[8];         /* tokenizer.ggml.pre values, NULL-terminated */
    const char *regex[MAX_REGEX]; /* applied in turn to the previous pieces */
    bool add_bos;                 /* default when add_bos_token is absent */
};

static const struct pre_def pre_defs[] = {
    /* each digit alone, then GPT-2 (HF: Digits(individual) + ByteLevel) */
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", NULL},
     {NUMBER, GPT2_RE, NULL},
     false},
    {{"gpt-2", "phi-2", "mpt", "olmo", "jais", NULL}, {GPT2_RE, NULL, NULL}, false},
};

/* "smollm, starcoder, ..." for messages. */
static void pre_names(char *out, size_t cap)
{
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(pre_defs) / sizeof(pre_defs[0]); i++)
        for (const char *const *n = pre_defs[i].names; *n && w < cap; n++)
            w += (size_t)snprintf(out + w, cap - w, "%s%s", w ? ", " : "", *n);
}

static const struct pre_def *pre_find(struct gguf_str name)
{
    for (size_t i = 0; i < sizeof(pre_defs) / sizeof(pre_defs[0]); i++)
        for (const char *const *n = pre_defs[i].names; *n; n++)
            if (gguf_str_eq(name, *n))
                return &pre_defs[i];
    return NULL;
}

/* ---- tokens that end generation or are control by their text ---- */

enum role {
    ROLE_EOG,
    ROLE_FIM_PRE,
    ROLE_FIM_SUF,
    ROLE_FIM_MID,
    ROLE_FIM_PAD,
    ROLE_FIM_REP,
    ROLE_FIM_SEP
};

/* llama.cpp (llama_vocab::impl::load) recognises these texts: EOG ones always
 * end generation; FIM pad/repo/sep ones do when no *_token_id key names the
 * role. All of them are treated as control tokens. */
static const struct {
    const char *text;
    enum role role;
} role_texts[] = {
    /* clang-format off */
    {"<|eot_id|>", ROLE_EOG},      {"<|im_end|>", ROLE_EOG},       {"<|end|>", ROLE_EOG},
    {"<|return|>", ROLE_EOG},      {"<|call|>", ROLE_EOG},         {"<|flush|>", ROLE_EOG},
    {"<|calls|>", ROLE_EOG},       {"<end_of_turn>", ROLE_EOG},    {"<|endoftext|>", ROLE_EOG},
    {"</s>", ROLE_EOG},            {"<|eom_id|>", ROLE_EOG},       {"<EOT>", ROLE_EOG},
    {"_<EOT>", ROLE_EOG},          {"[EOT]", ROLE_EOG},            {"[EOS]", ROLE_EOG},
    {"<|end_of_text|>", ROLE_EOG}, {"<end_of_utterance>", ROLE_EOG}, {"<eos>", ROLE_EOG},
    {"<turn|>", ROLE_EOG},         {"<|tool_response>", ROLE_EOG}, {"[e~[", ROLE_EOG},
    {"<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", ROLE_EOG},
    {"<|fim_prefix|>", ROLE_FIM_PRE}, {"<fim-prefix>", ROLE_FIM_PRE}, {"<fim_prefix>", ROLE_FIM_PRE},
    {"<PRE>", ROLE_FIM_PRE},          {"<|code_prefix|>", ROLE_FIM_PRE},
    {"<|fim_suffix|>", ROLE_FIM_SUF}, {"<fim-suffix>", ROLE_FIM_SUF}, {"<fim_suffix>", ROLE_FIM_SUF},
    {"<SUF>", ROLE_FIM_SUF},          {"<|code_suffix|>", ROLE_FIM_SUF},
    {"<|fim_middle|>", ROLE_FIM_MID}, {"<fim-middle>", ROLE_FIM_MID}, {"<fim_middle>", ROLE_FIM_MID},
    {"<MID>", ROLE_FIM_MID},          {"<|code_middle|>", ROLE_FIM_MID},
    {"<|fim_pad|>", ROLE_FIM_PAD},    {"<fim-pad>", ROLE_FIM_PAD},    {"<fim_pad>", ROLE_FIM_PAD},
    {"<PAD>", ROLE_FIM_PAD},          {"[PAD]", ROLE_FIM_PAD},
    {"<|fim_repo|>", ROLE_FIM_REP},   {"<|repo_name|>", ROLE_FIM_REP}, {"<fim-repo>", ROLE_FIM_REP},
    {"<REPO>", ROLE_FIM_REP},         {"<reponame>", ROLE_FIM_REP},
    {"<|file_sep|>", ROLE_FIM_SEP},
    /* clang-format on */
};

/* ---- the vocabulary ---- */

struct merge_slot {
    uint64_t key;   /* left sid << 32 | right sid; UINT64_MAX = empty */
    int32_t rank;   /* index in tokenizer.ggml.merges */
    int32_t result; /* sid of left + right */
};

struct tok_vocab {
    size_t n_tokens;
    struct strtab str;         /* token texts, merge parts and merge results */
    uint32_t *tok_sid;         /* [n_tokens] sid of each token's text */
    int32_t *sid_tok;          /* [str.n] token whose text it is, or -1 */
    uint8_t *type;             /* [n_tokens] enum tok_type */
    struct merge_slot *merges; /* [merge_mask + 1] */
    size_t merge_mask;
    int32_t byte_sid[256]; /* sid of byte b's one-character text, -1 if none */
    int32_t byte_tok[256]; /* token for byte b alone, or -1 */
    int32_t *special;      /* ids split out before BPE, longest text first */
    size_t n_special;
    const struct pre_def *pre;
    char *pre_name; /* owned copy of tokenizer.ggml.pre */
    pcre2_code *re[MAX_REGEX];
    size_t n_re;
    char *pieces;        /* owned: every token's detokenized bytes */
    uint32_t *piece_off; /* [n_tokens + 1] offsets into pieces */
    size_t max_piece;    /* bytes */
    int32_t bos, eos;
    bool add_bos;
    uint8_t *eog;     /* [n_tokens] 1 = ends generation */
    int32_t *eog_ids; /* ascending */
    size_t n_eog;
    char *chat_template; /* owned, or NULL */
};

static uint64_t merge_hash(uint64_t key)
{
    return (key * 0x9E3779B97F4A7C15ull) >> 17;
}

static const struct merge_slot *merge_find(const tok_vocab *v, int32_t left, int32_t right)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = merge_hash(key) & v->merge_mask;
    for (;;) {
        const struct merge_slot *s = &v->merges[i];
        if (s->key == key)
            return s;
        if (s->key == UINT64_MAX)
            return NULL;
        i = (i + 1) & v->merge_mask;
    }
}

/* Record merge "left right" with its rank; the first of duplicates wins. */
static void merge_add(tok_vocab *v, int32_t left, int32_t right, int32_t rank, int32_t result)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = merge_hash(key) & v->merge_mask;
    while (v->merges[i].key != UINT64_MAX) {
        if (v->merges[i].key == key)
            return;
        i = (i + 1) & v->merge_mask;
    }
    v->merges[i] = (struct merge_slot){key, rank, result};
}

static int load_merges(tok_vocab *v, const struct tok_spec *spec, struct err *err)
{
    size_t n_slots = 16;
    while (n_slots < 2 * spec->n_merges + 2)
        n_slots *= 2;
    v->merges = xmalloc(n_slots * sizeof(*v->merges));
    for (size_t i = 0; i < n_slots; i++)
        v->merges[i].key = UINT64_MAX;
    v->merge_mask = n_slots - 1;
    char *cat = NULL;
    size_t cat_cap = 0;
    int rc = 0;
    for (size_t i = 0; i < spec->n_merges && i < INT32_MAX; i++) {
        struct gguf_str m = spec->merges[i];
        /* split at the first space after the first byte, as llama.cpp does */
        const char *sp = m.len > 1 ? memchr(m.p + 1, ' ', m.len - 1) : NULL;
        if (!sp)
            continue;
        size_t nl = (size_t)(sp - m.p), nr = m.len - nl - 1;
        if (nr == 0)
            continue;
        XGROW(cat, cat_cap, nl + nr);
        memcpy(cat, m.p, nl);
        memcpy(cat + nl, sp + 1, nr);
        int32_t l = strtab_intern(&v->str, m.p, nl);
        int32_t r = strtab_intern(&v->str, sp + 1, nr);
        int32_t res = strtab_intern(&v->str, cat, nl + nr);
        if (l < 0 || r < 0 || res < 0) {
            rc = err_set(err, FP_ERR_FORMAT, "tokenizer merges are too large");
            break;
        }
        merge_add(v, l, r, (int32_t)i, res);
    }
    free(cat);
    return rc ? -1 : 0;
}

/* Types, roles and the EOG set (llama.cpp's text rules, see role_texts). */
static void load_roles(tok_vocab *v, const struct tok_spec *spec)
{
    int64_t fim[ROLE_FIM_SEP + 1];
    for (int r = 0; r <= ROLE_FIM_SEP; r++)
        fim[r] = -1;
    fim[ROLE_FIM_PAD] = spec->fim_pad;
    fim[ROLE_FIM_REP] = spec->fim_rep;
    fim[ROLE_FIM_SEP] = spec->fim_sep;
    bool fim_keyed[ROLE_FIM_SEP + 1];
    for (int r = 0; r <= ROLE_FIM_SEP; r++)
        fim_keyed[r] = fim[r] >= 0 && r >= ROLE_FIM_PAD;
    v->eog = xcalloc(v->n_tokens ? v->n_tokens : 1, 1);
    for (size_t k = 0; k < sizeof(role_texts) / sizeof(role_texts[0]); k++) {
        const char *t = role_texts[k].text;
        int32_t sid = strtab_find(&v->str, t, strlen(t));
        int32_t id = sid < 0 ? -1 : v->sid_tok[sid];
        if (id < 0)
            continue;
        enum role r = role_texts[k].role;
        if (r == ROLE_EOG) {
            v->eog[id] = 1;
        } else if (fim_keyed[r]) {
            continue; /* the key names this role's token */
        } else if (fim[r] < 0 || id < fim[r]) {
            fim[r] = id;
        }
        v->type[id] = TOK_CONTROL;
    }
    const int64_t ends[] = {
        v->eos, spec->eot, spec->eom, fim[ROLE_FIM_PAD], fim[ROLE_FIM_REP], fim[ROLE_FIM_SEP]};
    for (size_t k = 0; k < sizeof(ends) / sizeof(ends[0]); k++)
        if (ends[k] >= 0)
            v->eog[ends[k]] = 1;
    v->eog_ids = xmalloc((v->n_tokens ? v->n_tokens : 1) * sizeof(*v->eog_ids));
    for (size_t i = 0; i < v->n_tokens; i++)
        if (v->eog[i])
            v->eog_ids[v->n_eog++] = (int32_t)i;
}

struct len_id {
    uint32_t len; /* text bytes */
    int32_t id;
};

static int special_cmp(const void *a, const void *b)
{
    const struct len_id *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Tokens matched literally before BPE: control, user-defined and unknown
 * ones, longest first (llama.cpp cache_special_tokens). */
static void load_specials(tok_vocab *v)
{
    struct len_id *li = xmalloc(v->n_tokens * sizeof(*li));
    for (size_t i = 0; i < v->n_tokens; i++) {
        uint8_t t = v->type[i];
        uint32_t len = v->str.len[v->tok_sid[i]];
        if ((t == TOK_CONTROL || t == TOK_USER_DEFINED || t == TOK_UNKNOWN) && len > 0)
            li[v->n_special++] = (struct len_id){len, (int32_t)i};
    }
    /* ties (same length) in id order; llama.cpp's std::sort leaves them unspecified */
    qsort(li, v->n_special, sizeof(*li), special_cmp);
    v->special = xmalloc((v->n_special ? v->n_special : 1) * sizeof(*v->special));
    for (size_t i = 0; i < v->n_special; i++)
        v->special[i] = li[i].id;
    free(li);
}

/* Every token's detokenized bytes (llama.cpp token_to_piece with special). */
static void load_pieces(tok_vocab *v, const int16_t cp_byte[BYTE_CP_LIMIT])
{
    size_t cap = v->str.n_bytes + 16, n = 0;
    v->pieces = xmalloc(cap);
    v->piece_off = xmalloc((v->n_tokens + 1) * sizeof(*v->piece_off));
    for (size_t id = 0; id < v->n_tokens; id++) {
        const uint8_t *t = (const uint8_t *)v->str.bytes + v->str.off[v->tok_sid[id]];
        size_t len = v->str.len[v->tok_sid[id]];
        XGROW(v->pieces, cap, n + len + 1);
        v->piece_off[id] = (uint32_t)n;
        switch (v->type[id]) {
        case TOK_CONTROL:
        case TOK_UNKNOWN:
        case TOK_USER_DEFINED:
            memcpy(v->pieces + n, t, len);
            n += len;
            break;
        case TOK_NORMAL:
        case TOK_BYTE:
            for (size_t i = 0, adv; i < len; i += adv) {
                int32_t cp = utf8_decode(t + i, len - i, &adv);
                if (cp >= 0 && cp < BYTE_CP_LIMIT && cp_byte[cp] >= 0) {
                    v->pieces[n++] = (char)cp_byte[cp];
                } else { /* not a byte's image: keep it as it is */
                    memcpy(v->pieces + n, t + i, adv);
                    n += adv;
                }
            }
            break;
        default: /* unused and undefined tokens render as nothing */
            break;
        }
        if (n - v->piece_off[id] > v->max_piece)
            v->max_piece = n - v->piece_off[id];
    }
    v->piece_off[v->n_tokens] = (uint32_t)n;
}

static int compile_regexes(tok_vocab *v, struct err *err)
{
    uint32_t jit = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit);
    for (v->n_re = 0; v->n_re < MAX_REGEX && v->pre->regex[v->n_re]; v->n_re++) {
        const char *src = v->pre->regex[v->n_re];
        int code;
        PCRE2_SIZE at;
        v->re[v->n_re] =
            pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &at, NULL);
        if (!v->re[v->n_re]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof(msg));
            return err_set(err, FP_ERR_UNSUPPORTED,
                           "pre-tokenizer '%s': regex does not compile at offset %zu: %s",
                           v->pre_name, (size_t)at, (const char *)msg),
                   -1;
        }
        if (jit)
            pcre2_jit_compile(v->re[v->n_re], PCRE2_JIT_COMPLETE); /* else interpreted */
    }
    return 0;
}

/* Check a token id from the metadata: -1 stays "none"; out of range is
 * ignored with a warning, as llama.cpp does. */
static int32_t check_id(const char *what, int64_t id, size_t n_tokens)
{
    if (id < 0)
        return -1;
    if ((uint64_t)id >= n_tokens) {
        log_warn("tokenizer: %s %lld is out of range (%zu tokens), ignored", what, (long long)id,
                 n_tokens);
        return -1;
    }
    return (int32_t)id;
}

int tok_new(const struct tok_spec *spec_in, tok_vocab **out, struct err *err)
{
    struct tok_spec spec = *spec_in;
    *out = NULL;
    if (!gguf_str_eq(spec.model, "gpt2"))
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "tokenizer model '%.*s' is not supported (only 'gpt2' byte-level BPE)",
                       (int)(spec.model.len > 64 ? 64 : spec.model.len),
                       spec.model.p ? spec.model.p : ""),
               -1;
    const struct pre_def *pre = pre_find(spec.pre);
    if (!pre) {
        char known[512];
        pre_names(known, sizeof(known));
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported (known: %s)",
                       (int)(spec.pre.len > 64 ? 64 : spec.pre.len), spec.pre.p ? spec.pre.p : "",
                       known),
               -1;
    }
    if (spec.n_tokens == 0 || spec.n_tokens > INT32_MAX / 2)
        return err_set(err, FP_ERR_FORMAT, "tokenizer: %zu tokens in 'tokenizer.ggml.tokens'",
                       spec.n_tokens),
               -1;

    tok_vocab *v = xcalloc(1, sizeof(*v));
    v->n_tokens = spec.n_tokens;
    v->pre = pre;
    v->pre_name = xstrndup(spec.pre.p, spec.pre.len);
    strtab_rehash(&v->str, 1024);
    v->tok_sid = xmalloc(v->n_tokens * sizeof(*v->tok_sid));
    v->type = xmalloc(v->n_tokens);
    int rc = 0;
    for (size_t i = 0; i < v->n_tokens; i++) {
        int32_t sid = strtab_intern(&v->str, spec.tokens[i].p, spec.tokens[i].len);
        if (sid < 0) {
            rc = err_set(err, FP_ERR_FORMAT, "tokenizer tokens are too large");
            goto out;
        }
        v->tok_sid[i] = (uint32_t)sid;
        int32_t t = spec.types ? spec.types[i] : TOK_NORMAL;
        v->type[i] = (uint8_t)(t >= TOK_UNDEFINED && t <= TOK_BYTE ? t : TOK_UNDEFINED);
    }
    if (load_merges(v, &spec, err) < 0) {
        rc = -1;
        goto out;
    }
    /* sid -> token: the last of duplicate texts wins, as in llama.cpp; empty
     * texts are never looked up */
    v->sid_tok = xmalloc(v->str.n * sizeof(*v->sid_tok));
    for (size_t s = 0; s < v->str.n; s++)
        v->sid_tok[s] = -1;
    for (size_t i = 0; i < v->n_tokens; i++)
        if (v->str.len[v->tok_sid[i]] > 0)
            v->sid_tok[v->tok_sid[i]] = (int32_t)i;

    v->bos = check_id("bos_token_id", spec.bos, v->n_tokens);
    v->eos = check_id("eos_token_id", spec.eos, v->n_tokens);
    spec.eot = check_id("eot_token_id", spec.eot, v->n_tokens);
    spec.eom = check_id("eom_token_id", spec.eom, v->n_tokens);
    spec.fim_pad = check_id("fim_pad_token_id", spec.fim_pad, v->n_tokens);
    spec.fim_rep = check_id("fim_rep_token_id", spec.fim_rep, v->n_tokens);
    spec.fim_sep = check_id("fim_sep_token_id", spec.fim_sep, v->n_tokens);
    v->add_bos = spec.add_bos < 0 ? pre->add_bos : spec.add_bos != 0;
    if (spec.chat_template.len)
        v->chat_template = xstrndup(spec.chat_template.p, spec.chat_template.len);

    uint16_t byte_cp[256];
    int16_t cp_byte[BYTE_CP_LIMIT];
    byte_map_init(byte_cp, cp_byte);
    for (int b = 0; b < 256; b++) {
        char u[4];
        size_t n = utf8_encode(byte_cp[b], u);
        v->byte_sid[b] = strtab_find(&v->str, u, n);
        v->byte_tok[b] = v->byte_sid[b] >= 0 ? v->sid_tok[v->byte_sid[b]] : -1;
    }
    load_roles(v, &spec);
    load_specials(v);
    load_pieces(v, cp_byte);
    if (compile_regexes(v, err) < 0)
        rc = -1;
out:
    if (rc) {
        tok_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

void tok_free(tok_vocab *v)
{
    if (!v)
        return;
    strtab_release(&v->str);
    free(v->tok_sid);
    free(v->sid_tok);
    free(v->type);
    free(v->merges);
    free(v->special);
    free(v->pre_name);
    for (size_t i = 0; i < v->n_re; i++)
        pcre2_code_free(v->re[i]);
    free(v->pieces);
    free(v->piece_off);
    free(v->eog);
    free(v->eog_ids);
    free(v->chat_template);
    free(v);
}

/* ---- reading the GGUF ---- */

/* A token id key: absent or negative is -1 ("none"). */
static int get_id(const struct gguf_file *f, const char *key, int64_t *out)
{
    int64_t id;
    *out = -1;
    if (!gguf_find_kv(f, key))
        return 0;
    if (gguf_get_i64(f, key, &id) < 0 || id > INT32_MAX)
        return -1;
    *out = id < 0 ? -1 : id;
    return 0;
}

/* A string array's elements, or NULL with err set. */
static struct gguf_str *get_strs(const struct gguf_file *f, const char *key, size_t *n,
                                 struct err *err)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return err_set(err, FP_ERR_FORMAT, "tokenizer: missing '%s'", key), NULL;
    if (kv->type != GGUF_T_ARR || kv->arr_type != GGUF_T_STR || kv->arr_n > INT32_MAX / 2)
        return err_set(err, FP_ERR_FORMAT, "tokenizer: '%s' is not an array of strings", key), NULL;
    struct gguf_str *s = xmalloc((kv->arr_n ? kv->arr_n : 1) * sizeof(*s));
    if (gguf_arr_strs(kv, s) < 0) {
        free(s);
        return err_set(err, FP_ERR_FORMAT, "tokenizer: '%s' cannot be read", key), NULL;
    }
    *n = (size_t)kv->arr_n;
    return s;
}

/* Arrays that spec_from_gguf allocates for a tok_spec. */
struct spec_bufs {
    struct gguf_str *tokens, *merges;
    int32_t *types;
};

static void spec_bufs_release(struct spec_bufs *b)
{
    free(b->tokens);
    free(b->merges);
    free(b->types);
}

/* Fill spec from f's metadata (b owns the arrays). An unsupported model or
 * pre-tokenizer is left for tok_new to refuse, before the arrays are read.
 * Returns 0, or -1 with err set. */
static int spec_from_gguf(const struct gguf_file *f, struct tok_spec *out, struct spec_bufs *b,
                          struct err *err)
{
    struct tok_spec spec = {.add_bos = -1,
                            .bos = -1,
                            .eos = -1,
                            .eot = -1,
                            .eom = -1,
                            .fim_pad = -1,
                            .fim_rep = -1,
                            .fim_sep = -1};
    struct gguf_str *tokens = NULL, *merges = NULL;
    int32_t *types = NULL;
    int rc = -1;
    if (gguf_get_str(f, "tokenizer.ggml.model", &spec.model) < 0) {
        err_set(err, FP_ERR_FORMAT, "tokenizer: missing 'tokenizer.ggml.model'");
        goto out;
    }
    if (!gguf_str_eq(spec.model, "gpt2")) /* refuse before reading the arrays */
        goto build;
    if (gguf_get_str(f, "tokenizer.ggml.pre", &spec.pre) < 0) {
        err_set(err, FP_ERR_UNSUPPORTED,
                "tokenizer: no 'tokenizer.ggml.pre': the pre-tokenizer is unknown (convert the "
                "model with a recent llama.cpp)");
        goto out;
    }
    if (!pre_find(spec.pre))
        goto build;
    if (!(tokens = get_strs(f, "tokenizer.ggml.tokens", &spec.n_tokens, err)))
        goto out;
    if (!(merges = get_strs(f, "tokenizer.ggml.merges", &spec.n_merges, err)))
        goto out;
    const struct gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.token_type");
    if (kv) {
        if (kv->type != GGUF_T_ARR || kv->arr_n < spec.n_tokens) {
            err_set(err, FP_ERR_FORMAT,
                    "tokenizer: 'tokenizer.ggml.token_type' has %llu entries "
                    "for %zu tokens",
                    (unsigned long long)kv->arr_n, spec.n_tokens);
            goto out;
        }
        types = xmalloc((spec.n_tokens ? spec.n_tokens : 1) * sizeof(*types));
        for (size_t i = 0; i < spec.n_tokens; i++) {
            int64_t t;
            if (gguf_arr_i64(kv, i, &t) < 0) {
                err_set(err, FP_ERR_FORMAT,
                        "tokenizer: 'tokenizer.ggml.token_type' is not numeric");
                goto out;
            }
            types[i] = (int32_t)(t < 0 || t > TOK_BYTE ? TOK_UNDEFINED : t);
        }
        spec.types = types;
    }
    static const struct {
        const char *key;
        size_t off;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(struct tok_spec, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(struct tok_spec, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(struct tok_spec, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(struct tok_spec, eom)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(struct tok_spec, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(struct tok_spec, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(struct tok_spec, fim_sep)},
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        if (get_id(f, ids[i].key, (int64_t *)((char *)&spec + ids[i].off)) < 0) {
            err_set(err, FP_ERR_FORMAT, "tokenizer: '%s' is not a token id", ids[i].key);
            goto out;
        }
    }
    bool add_bos;
    if (gguf_find_kv(f, "tokenizer.ggml.add_bos_token")) {
        if (gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos) < 0) {
            err_set(err, FP_ERR_FORMAT, "tokenizer: 'tokenizer.ggml.add_bos_token' is not a bool");
            goto out;
        }
        spec.add_bos = add_bos;
    }
    if (gguf_find_kv(f, "tokenizer.chat_template") &&
        gguf_get_str(f, "tokenizer.chat_template", &spec.chat_template) < 0) {
        err_set(err, FP_ERR_FORMAT, "tokenizer: 'tokenizer.chat_template' is not a string");
        goto out;
    }
build:
    spec.tokens = tokens;
    spec.merges = merges;
    rc = 0;
out:
    *out = spec;
    *b = (struct spec_bufs){tokens, merges, types};
    return rc;
}

int tok_load(const struct gguf_file *f, tok_vocab **out, struct err *err)
{
    struct tok_spec spec;
    struct spec_bufs b;
    *out = NULL;
    int rc = spec_from_gguf(f, &spec, &b, err);
    if (rc == 0)
        rc = tok_new(&spec, out, err);
    spec_bufs_release(&b);
    return rc;
}

/* ---- accessors ---- */

size_t tok_n_vocab(const tok_vocab *v)
{
    return v->n_tokens;
}

int32_t tok_bos(const tok_vocab *v)
{
    return v->bos;
}

int32_t tok_eos(const tok_vocab *v)
{
    return v->eos;
}

bool tok_add_bos(const tok_vocab *v)
{
    return v->add_bos;
}

bool tok_is_eog(const tok_vocab *v, int32_t id)
{
    return id >= 0 && (size_t)id < v->n_tokens && v->eog[id];
}

const int32_t *tok_eog_ids(const tok_vocab *v, size_t *n)
{
    *n = v->n_eog;
    return v->eog_ids;
}

enum tok_type tok_type_of(const tok_vocab *v, int32_t id)
{
    return id >= 0 && (size_t)id < v->n_tokens ? (enum tok_type)v->type[id] : TOK_UNDEFINED;
}

const char *tok_chat_template(const tok_vocab *v)
{
    return v->chat_template;
}

const char *tok_pre_name(const tok_vocab *v)
{
    return v->pre_name;
}

const char *tok_pre_regex(const tok_vocab *v, size_t i)
{
    return i < v->n_re ? v->pre->regex[i] : NULL;
}

const char *tok_text(const tok_vocab *v, int32_t id)
{
    if (id < 0 || (size_t)id >= v->n_tokens)
        return NULL;
    return v->str.bytes + v->str.off[v->tok_sid[id]];
}

/* ---- encoding ---- */

struct sym {
    int32_t sid;  /* current string, -1 if the byte has none */
    int32_t prev; /* neighbours in the piece, -1 at the ends */
    int32_t next;
    uint32_t start; /* byte offset in the piece */
    uint32_t len;   /* bytes; 0 once merged into the left neighbour */
};

struct bigram {
    int32_t rank; /* lower merges first */
    int32_t left; /* symbol index; ties go to the leftmost */
    int32_t lsid; /* the strings it was made from, to spot stale entries */
    int32_t rsid;
    int32_t result; /* sid of the merged string */
};

/* Per-call scratch, so one vocabulary serves many threads. */
struct enc {
    const tok_vocab *v;
    const uint8_t *text;
    pcre2_match_data *md[MAX_REGEX];
    struct sym *sym;
    size_t sym_cap;
    struct bigram *heap;
    size_t heap_n, heap_cap;
    int32_t **ids;
    size_t *n, *cap;
    struct err *err;
};

static void emit(struct enc *e, int32_t id)
{
    XGROW(*e->ids, *e->cap, *e->n + 1);
    (*e->ids)[(*e->n)++] = id;
}

static bool bigram_less(const struct bigram *a, const struct bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct enc *e, int32_t left, int32_t right)
{
    if (left < 0 || right < 0 || e->sym[left].sid < 0 || e->sym[right].sid < 0)
        return;
    const struct merge_slot *m = merge_find(e->v, e->sym[left].sid, e->sym[right].sid);
    if (!m)
        return;
    XGROW(e->heap, e->heap_cap, e->heap_n + 1);
    size_t i = e->heap_n++;
    struct bigram b = {m->rank, left, e->sym[left].sid, e->sym[right].sid, m->result};
    while (i > 0 && bigram_less(&b, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = b;
}

static struct bigram heap_pop(struct enc *e)
{
    struct bigram top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->heap_n)
            break;
        if (c + 1 < e->heap_n && bigram_less(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!bigram_less(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->heap_n)
        e->heap[i] = last;
    return top;
}

/* BPE over one pre-tokenized piece text[off..off+len): start from one symbol
 * per byte (its byte-map character), merge the lowest-ranked adjacent pair
 * until none is in the merge list, then look the symbols up. */
static int bpe(struct enc *e, size_t off, size_t len)
{
    const tok_vocab *v = e->v;
    const uint8_t *p = e->text + off;
    if (len > INT32_MAX)
        return err_set(e->err, FP_ERR_RESOURCE, "a pre-tokenized piece of %zu bytes is too long",
                       len),
               -1;
    XGROW(e->sym, e->sym_cap, len);
    for (size_t i = 0; i < len; i++)
        e->sym[i] = (struct sym){v->byte_sid[p[i]], (int32_t)i - 1,
                                 i + 1 < len ? (int32_t)i + 1 : -1, (uint32_t)i, 1};
    e->heap_n = 0;
    for (size_t i = 1; i < len; i++)
        heap_push(e, (int32_t)i - 1, (int32_t)i);
    while (e->heap_n) {
        struct bigram b = heap_pop(e);
        struct sym *l = &e->sym[b.left];
        if (l->len == 0 || l->sid != b.lsid || l->next < 0)
            continue;
        struct sym *r = &e->sym[l->next];
        if (r->sid != b.rsid)
            continue; /* stale: one side has grown since */
        l->sid = b.result;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0)
            e->sym[l->next].prev = b.left;
        heap_push(e, l->prev, b.left);
        heap_push(e, b.left, l->next);
    }
    for (int32_t i = 0; i >= 0 && len; i = e->sym[i].next) {
        const struct sym *s = &e->sym[i];
        int32_t id = s->sid >= 0 ? v->sid_tok[s->sid] : -1;
        if (id >= 0) {
            emit(e, id);
            continue;
        }
        /* a merge result or byte outside the vocabulary: one token per
         * byte, and a byte without a token is dropped, as llama.cpp does
         * (SmolLM2 has none for 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xF1
         * and 0xF2, among the bytes that valid UTF-8 can hold) */
        for (uint32_t k = 0; k < s->len; k++)
            if (v->byte_tok[p[s->start + k]] >= 0)
                emit(e, v->byte_tok[p[s->start + k]]);
    }
    return 0;
}

/* Split text[off..off+len) with regex `level`; matches and the spans between
 * them both become pieces for the next level, and the last level's pieces
 * go to BPE (llama.cpp unicode_regex_split). */
static int pretokenize(struct enc *e, size_t off, size_t len, size_t level)
{
    if (len == 0)
        return 0;
    if (level == e->v->n_re)
        return bpe(e, off, len);
    const uint8_t *s = e->text + off;
    size_t pos = 0, done = 0;
    while (pos < len) {
        int rc = pcre2_match(e->v->re[level], s, len, pos, PCRE2_NO_UTF_CHECK, e->md[level], NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            return err_set(e->err, FP_ERR_RESOURCE, "pre-tokenizer failed at offset %zu: %s",
                           off + pos, (const char *)msg),
                   -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md[level]);
        size_t ms = ov[0], me = ov[1];
        if (ms > done && pretokenize(e, off + done, ms - done, level + 1) < 0)
            return -1;
        if (me > ms && pretokenize(e, off + ms, me - ms, level + 1) < 0)
            return -1;
        done = me;
        if (me > pos) {
            pos = me;
        } else { /* an empty match: step over one character */
            size_t adv;
            utf8_step(s + pos, len - pos, &adv);
            pos += adv;
        }
    }
    if (done < len)
        return pretokenize(e, off + done, len - done, level + 1);
    return 0;
}

struct frag {
    size_t off, len; /* raw text span when tok < 0 */
    int32_t tok;     /* a special token, or -1 */
};

/* Split the raw text around special tokens, longest token first, each
 * occurrence left to right (llama.cpp tokenizer_st_partition). */
static size_t partition(const tok_vocab *v, const char *text, size_t len, bool parse_special,
                        struct frag **frags)
{
    size_t n = 1, cap = 4;
    *frags = xmalloc(cap * sizeof(**frags));
    (*frags)[0] = (struct frag){0, len, -1};
    for (size_t k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        if (!parse_special && v->type[id] != TOK_USER_DEFINED)
            continue;
        const char *t = v->str.bytes + v->str.off[v->tok_sid[id]];
        size_t tl = v->str.len[v->tok_sid[id]];
        if (tl > len || !memmem(text, len, t, tl))
            continue;
        for (size_t i = 0; i < n; i++) {
            struct frag f = (*frags)[i];
            if (f.tok >= 0 || f.len < tl)
                continue;
            const char *hit = memmem(text + f.off, f.len, t, tl);
            if (!hit)
                continue;
            /* f becomes [left] token [right]; the loop goes on with the
             * right part, which may hold more occurrences */
            size_t at = (size_t)(hit - text), rest = f.off + f.len - (at + tl), np = 0;
            struct frag parts[3];
            if (at > f.off)
                parts[np++] = (struct frag){f.off, at - f.off, -1};
            size_t tok_at = i + np;
            parts[np++] = (struct frag){0, 0, id};
            if (rest)
                parts[np++] = (struct frag){at + tl, rest, -1};
            XGROW(*frags, cap, n + np - 1);
            memmove(&(*frags)[i + np], &(*frags)[i + 1], (n - i - 1) * sizeof(**frags));
            memcpy(&(*frags)[i], parts, np * sizeof(*parts));
            n += np - 1;
            i = tok_at;
        }
    }
    return n;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, bool parse_special, bool add_bos,
               int32_t **ids, size_t *n, size_t *cap, struct err *err)
{
    size_t bad = utf8_invalid_at((const uint8_t *)text, len);
    if (bad < len)
        return err_set(err, FP_ERR_USAGE, "text is not valid UTF-8 at byte %zu (0x%02x)", bad,
                       (uint8_t)text[bad]),
               -1;
    if (add_bos && v->bos < 0)
        return err_set(err, FP_ERR_USAGE, "a BOS token was asked for but the model has none"), -1;
    struct enc e = {
        .v = v, .text = (const uint8_t *)text, .ids = ids, .n = n, .cap = cap, .err = err};
    size_t n0 = *n;
    int rc = 0;
    if (add_bos)
        emit(&e, v->bos);
    struct frag *frags = NULL;
    size_t nf = len ? partition(v, text, len, parse_special, &frags) : 0;
    for (size_t i = 0; i < v->n_re; i++)
        e.md[i] = pcre2_match_data_create_from_pattern(v->re[i], NULL);
    for (size_t i = 0; i < nf && rc == 0; i++) {
        if (frags[i].tok >= 0)
            emit(&e, frags[i].tok);
        else
            rc = pretokenize(&e, frags[i].off, frags[i].len, 0);
    }
    for (size_t i = 0; i < v->n_re; i++)
        pcre2_match_data_free(e.md[i]);
    free(frags);
    free(e.sym);
    free(e.heap);
    if (rc < 0)
        *n = n0;
    return rc;
}

/* ---- decoding ---- */

size_t tok_piece(const tok_vocab *v, int32_t id, char *out, size_t cap)
{
    if (id < 0 || (size_t)id >= v->n_tokens)
        return 0;
    size_t n = v->piece_off[id + 1] - v->piece_off[id];
    if (cap)
        memcpy(out, v->pieces + v->piece_off[id], n < cap ? n : cap);
    return n;
}

size_t tok_max_piece(const tok_vocab *v)
{
    return v->max_piece;
}

void tok_stream_init(struct tok_stream *s)
{
    s->n_pending = 0;
}

size_t tok_stream_push(const tok_vocab *v, struct tok_stream *s, int32_t id, char *out, size_t cap)
{
    const uint8_t *p = (const uint8_t *)"";
    size_t n = 0, w = 0;
    if (id >= 0 && (size_t)id < v->n_tokens) {
        p = (const uint8_t *)v->pieces + v->piece_off[id];
        n = v->piece_off[id + 1] - v->piece_off[id];
    }
    size_t j = 0; /* bytes of the piece used */
    if (s->n_pending) {
        /* finish the characters that begin in pending; they end within
         * the piece's first 4 bytes or not at all */
        uint8_t tmp[8];
        size_t k = s->n_pending, m = n < 4 ? n : 4;
        memcpy(tmp, s->pending, k);
        memcpy(tmp + k, p, m);
        size_t i = 0, adv;
        while (i < k) {
            enum utf8_kind st = utf8_step(tmp + i, k + m - i, &adv);
            if (st == UTF8_SHORT) { /* the piece is all used up */
                memmove(s->pending, tmp + i, k + m - i);
                s->n_pending = k + m - i;
                return w;
            }
            utf8_lossy(tmp + i, adv, false, out, &w, cap);
            i += adv;
        }
        j = i - k;
        s->n_pending = 0;
    }
    j += utf8_lossy(p + j, n - j, true, out, &w, cap);
    memcpy(s->pending, p + j, n - j); /* at most 3 bytes */
    s->n_pending = n - j;
    return w;
}

size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap)
{
    size_t w = 0;
    utf8_lossy((const uint8_t *)s->pending, s->n_pending, false, out, &w, cap);
    s->n_pending = 0;
    return w;
}
