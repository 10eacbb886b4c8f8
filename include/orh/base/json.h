/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON helpers over jansson that every stage may use: unsigned 64-bit integers
 * (src/base/jsonu64.c), the compact text of a tree (src/base/jsondump.c), and jansson's
 * memory in a short-lived process (src/base/jsonarena.c).
 */
#ifndef ORH_BASE_JSON_H
#define ORH_BASE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Unsigned 64-bit integers. jansson integers are signed 64-bit, but config.json carries
 * values up to 2^64-1 (an unlimited rlimit is 18446744073709551615). orh_json_u64_escape()
 * turns each integer literal above INT64_MAX of a text into a marker string before jansson
 * parses it (orh_spec_parse() does); orh_json_u64() makes one; orh_json_dump() writes them
 * back as plain numbers. A document whose own strings
 * hold a NUL byte outside such markers is refused, so a marker cannot be forged.
 */
json_t *orh_json_u64(uint64_t v);
/* Is j a non-negative integer or a marker? Stores the value. */
bool orh_json_get_u64(const json_t *j, uint64_t *v);
/* Rewrite integer literals above INT64_MAX in a JSON text into markers. *out is NULL when
 * nothing needed rewriting; *n_markers counts the rewrites. */
int orh_json_u64_escape(const char *buf, size_t len, char **out, size_t *out_len,
			size_t *n_markers);
/* Count the markers in a tree; -EINVAL when a string other than a marker holds a NUL. */
int orh_json_u64_count(const json_t *j, size_t *n_markers);
/* Compact JSON text of v, as json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) writes it (the
 * objects' own key order), each marker written as the number it holds; malloc'd and
 * NUL-terminated, its length in *len. NULL when v holds what JSON cannot (jsondump.c). */
char *orh_json_dump(const json_t *v, size_t *len);
/* The writers of JSON text into a buffer (util.h's struct orh_buf), as jansson's
 * json_dumps(JSON_COMPACT) writes each value (jsondump.c), for text written from values
 * without a tree (the record). The string of s (NUL-terminated): false and nothing
 * written where s is NULL or not valid UTF-8, which json_string() refuses. */
struct orh_buf;
bool orh_json_put_str(struct orh_buf *o, const char *s);
void orh_json_put_int(struct orh_buf *o, json_int_t v);
/* false and nothing written for NaN and the infinities, which json_real() refuses */
bool orh_json_put_real(struct orh_buf *o, double v);
/* A time in milliseconds, to the microsecond ("12.345", rounded half away from zero): the
 * record's own number format. false and nothing written for NaN, the infinities and
 * |v| >= 1e15. */
bool orh_json_put_ms(struct orh_buf *o, double v);
/* The compact text of a tree, as orh_json_dump(); -1 where v holds what JSON cannot. */
int orh_json_put_value(struct orh_buf *o, const json_t *v);
/* An object of the n pairs keys[i] (literal, valid UTF-8): vals[i], every value's reference
 * taken; NULL (nothing left behind) when a value is NULL or out of memory. */
json_t *orh_json_object_of(size_t n, const char *const *keys, json_t **vals);
/* A string of the len bytes at s, as json_stringn() makes it: NULL where they are not
 * valid UTF-8. Bytes that are all ASCII (a node snapshot's text) are taken without
 * jansson's check of each byte, which they pass. */
json_t *orh_json_stringn(const char *s, size_t len);

/* jansson's memory from an arena that frees nothing before the process exits (not in
 * sanitizer builds), and its hash seed from getrandom(): for a process that serves one
 * container and exits. Call it before any other jansson call. */
void orh_json_arena_use(void);
/* jansson's hash seed from getrandom(), before any other jansson call: a process that
 * forks a worker a request (the NRI plugin) seeds once, and its workers inherit it, instead
 * of each reading /dev/urandom at its first object. */
void orh_json_seed(void);
/* Give back the text json_dumps() returned, through jansson's own free function (with the
 * arena in use, free() must not see it). */
void orh_json_free_text(char *text);
static inline void orh_json_free_textp(char **text)
{
	orh_json_free_text(*text);
}
/* A json_dumps() text given back at the end of its scope. */
#define _cleanup_json_text_ __attribute__((cleanup(orh_json_free_textp)))
/* A value's reference given back at the end of its scope, through the json_decrefp that
 * jansson >= 2.9 provides for its json_auto_t. */
#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

#endif
