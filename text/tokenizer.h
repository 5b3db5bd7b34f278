/* Text to token ids and back, read from a Hugging Face tokenizer.json or a
 * GGUF file: SentencePiece-style BPE with byte fallback (Llama-2, TinyLlama)
 * and byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM2).
 * The ids are those of Hugging Face `tokenizers` on every input. */
#ifndef FOLIO_TOKENIZER_H
#define FOLIO_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct folio_tokenizer;

/* Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json
 * (chat template, bos/eos tokens, add_bos_token); or, when the path is a
 * .gguf file (or a folder holding one and no config.json), the tokenizer in
 * its metadata (tokenizer.ggml.*, tokenizer.chat_template). */
int folio_tokenizer_load(const char *model_path, struct folio_tokenizer **out, char *err,
                         size_t errlen);
void folio_tokenizer_free(struct folio_tokenizer *t);

/* Encodes len bytes of text (any bytes; see tokenizer.c for invalid UTF-8).
 * add_special: Hugging Face's add_special_tokens (the BOS of the
 * post-processor). Special and added tokens in the text are matched before BPE.
 * Returns a malloc'ed array of *n ids, or NULL on allocation failure. */
int32_t *folio_tokenizer_encode(const struct folio_tokenizer *t, const char *text, size_t len,
                                bool add_special, size_t *n);

/* Decodes n ids as Hugging Face's decode() does. skip_special drops special
 * tokens. Returns a malloc'ed NUL-terminated string (length in *len), or NULL
 * when an id is out of range. */
char *folio_tokenizer_decode(const struct folio_tokenizer *t, const int32_t *ids, size_t n,
                             bool skip_special, size_t *len);

/* The bytes id adds to the text when it is not the first token, with no
 * UTF-8 repair (half a character stays half): what the grammar engine
 * matches (tokenizer_bytes.c). A special token's bytes are its text.
 * Returns 0 with a malloc'ed, NUL-terminated copy in *out (length *len, which
 * may be 0), or -1 for an id out of range or without a token, or when out of
 * memory. */
int folio_tokenizer_token_bytes(const struct folio_tokenizer *t, int32_t id, char **out,
                                size_t *len);

int32_t folio_tokenizer_vocab_size(const struct folio_tokenizer *t);
int32_t folio_tokenizer_bos_id(const struct folio_tokenizer *t); /* -1 when none */
int32_t folio_tokenizer_eos_id(const struct folio_tokenizer *t); /* -1 when none */
int32_t folio_tokenizer_token_id(const struct folio_tokenizer *t, const char *token); /* -1 */
bool folio_tokenizer_is_special(const struct folio_tokenizer *t, int32_t id);
/* From tokenizer_config.json; NULL when absent. */
const char *folio_tokenizer_chat_template(const struct folio_tokenizer *t);
const char *folio_tokenizer_bos_token(const struct folio_tokenizer *t);
const char *folio_tokenizer_eos_token(const struct folio_tokenizer *t);

/* Incremental detokenization for streaming: push ids one at a time and get
 * back only whole UTF-8 characters; the concatenation of everything emitted
 * (after folio_detok_finish) equals folio_tokenizer_decode of all the ids. */
struct folio_detok;
struct folio_detok *folio_detok_new(const struct folio_tokenizer *t, bool skip_special);
/* Appends the text that became complete to *out (malloc'ed, NUL-terminated,
 * length *len; may be empty). Returns 0, or -1 for an out-of-range id. */
int folio_detok_push(struct folio_detok *d, int32_t id, char **out, size_t *len);
/* Flushes bytes still held (an unfinished UTF-8 sequence becomes U+FFFD). */
int folio_detok_finish(struct folio_detok *d, char **out, size_t *len);
void folio_detok_free(struct folio_detok *d);

#endif
