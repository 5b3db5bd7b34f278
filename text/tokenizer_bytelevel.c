/* Byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM2): the model's tokens are
 * spelled in GPT-2's bytes_to_unicode alphabet, where every byte has a
 * printable character of its own (the printable Latin-1 bytes stand for
 * themselves, the other 68 bytes become U+0100 and up, in byte order). The
 * ByteLevel pre-tokenizer spells each word's bytes that way before BPE; the
 * ByteLevel decoder reads tokens back into bytes. */
#include <string.h>

#include "tokenizer_internal.h"

static bool stands_for_itself(int b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

void tok_byte_level_init(struct folio_tokenizer *t)
{
    int next = 0x100;
    for (size_t cp = 0; cp < sizeof t->char_byte / sizeof t->char_byte[0]; cp++)
        t->char_byte[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int cp = stands_for_itself(b) ? b : next++;
        t->byte_char[b] = (uint16_t)cp;
        t->char_byte[cp] = (int16_t)b;
    }
}

size_t tok_byte_level_map(const struct folio_tokenizer *t, const char *s, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        uint16_t cp = t->byte_char[(unsigned char)s[i]];
        if (cp < 0x80) {
            out[n++] = (char)cp;
        } else {
            out[n++] = (char)(0xC0 | (cp >> 6));
            out[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return n;
}

size_t tok_byte_level_unmap(const struct folio_tokenizer *t, const char *s, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t cl = tok_utf8_decode(s + i, &cp);
        if (cp >= sizeof t->char_byte / sizeof t->char_byte[0] || t->char_byte[cp] < 0) {
            memcpy(out, s, len);
            return len;
        }
        out[n++] = (char)t->char_byte[cp];
        i += cl;
    }
    return n;
}
