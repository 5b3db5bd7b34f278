/* Fuzzes the protobuf-c decoding of every control-plane message of
 * proto/folio.proto (what a process accepts from a peer over nng): arbitrary
 * bytes are unpacked as the message the first byte picks; what decodes must
 * pass protobuf-c's own check and pack again, and a packed form that decodes
 * must pack to the same bytes once more (packing is canonical after one
 * round). A packed form may fail to decode: protobuf-c 1.4.1 keeps a field
 * number 0 written in two bytes (0x80 0x00) as an unknown field, where it
 * refuses the one-byte form it packs; Folio never packs what it received. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio.pb-c.h"

static const ProtobufCMessageDescriptor *const messages[] = {
    &folio__sampling_params__descriptor,
    &folio__submit__descriptor,
    &folio__abort__descriptor,
    &folio__register__descriptor,
    &folio__register_reply__descriptor,
    &folio__heartbeat__descriptor,
    &folio__status_request__descriptor,
    &folio__status_reply__descriptor,
    &folio__load__descriptor,
    &folio__load_reply__descriptor,
    &folio__envelope__descriptor,
};
#define NUM_MESSAGES (sizeof messages / sizeof messages[0])

static void fail(const char *what, const ProtobufCMessageDescriptor *d)
{
    fprintf(stderr, "fuzz_ipc_proto: %s: %s\n", d->name, what);
    abort();
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len ? *len : 1);
    if (!buf)
        abort();
    if (protobuf_c_message_pack(m, buf) != *len)
        fail("pack wrote another size than get_packed_size said", m->descriptor);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = messages[data[0] % NUM_MESSAGES];
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size - 1, data + 1);
    if (!m)
        return 0;
    if (!protobuf_c_message_check(m))
        fail("a decoded message fails protobuf_c_message_check", d);
    size_t n1, n2;
    uint8_t *once = pack(m, &n1);
    protobuf_c_message_free_unpacked(m, NULL);
    ProtobufCMessage *again = protobuf_c_message_unpack(d, NULL, n1, once);
    if (!again) {
        free(once);
        return 0;
    }
    uint8_t *twice = pack(again, &n2);
    protobuf_c_message_free_unpacked(again, NULL);
    if (n1 != n2 || memcmp(once, twice, n1) != 0)
        fail("pack(unpack(pack(x))) differs from pack(x)", d);
    free(once);
    free(twice);
    return 0;
}
