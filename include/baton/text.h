/* baton/text.h: text corpora for language models, tokenized as bytes (token = byte value, vocabulary 256),
 * split into training and validation text by document, and cut into training windows.
 *
 * Documents: in the fortune files (Debian's `fortunes` package, /usr/share/games/fortunes) a document is a
 * fortune, the fortunes separated by lines holding only "%"; in any other text file a document is a
 * paragraph, the paragraphs separated by blank lines. Every 10th document (index % 10 == 9, in file order)
 * goes to validation; a file with fewer than 10 documents gives its last 10 % of bytes instead. Documents
 * are joined by one "\n" in each split.
 *
 * Windows: a split of n tokens holds (n - 1) / T windows of T + 1 tokens; window w is tokens
 * [w*T, w*T + T] (input = its first T, targets = its last T), so the windows' inputs are disjoint.
 *
 * Errors: BATON_OK or a negative baton_status with baton_last_error() naming the file and the fix. */
#ifndef BATON_TEXT_H
#define BATON_TEXT_H

#include <stddef.h>
#include <stdint.h>

#define BATON_TEXT_VOCAB 256
#define BATON_TEXT_MAX_BYTES ((size_t)1 << 30)

typedef struct {
    uint8_t *train, *val;      /* token bytes (owned) */
    size_t n_train, n_val;
    long docs_train, docs_val; /* documents in each split (0, 0 when the split was by bytes) */
} baton_text;

/* Every regular file of `dir` (default /usr/share/games/fortunes when NULL) except *.dat index files and
 * symbolic links (the *.u8 aliases), in name order. */
int baton_text_load_fortunes(baton_text *out, const char *dir);
/* One text file (UTF-8 or any bytes except NUL: a NUL byte means it is not text). */
int baton_text_load_file(baton_text *out, const char *path);
void baton_text_free(baton_text *t);
static inline long baton_text_windows(size_t n_tokens, int tlen) {
    return n_tokens > (size_t)tlen ? (long)((n_tokens - 1) / (size_t)tlen) : 0;
}
/* out (T+1) = tokens [w*T, w*T + T] */
void baton_text_window(const uint8_t *tokens, long w, int tlen, int32_t *out);

#endif
