/* The run record (record.h): a few dozen keys, set rarely, kept in fixed storage. */
#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "record.h"
#include "table.h"
#include "vramtap.h"
#include "snapshot_keys.h"

#define MAX_KEYS 48
#define KEY_LEN 48
#define TEXT_LEN 256

typedef struct {
    char key[KEY_LEN];
    char text[TEXT_LEN];
    long long num;
    int is_num;
} entry;

struct vt_record_frozen {
    entry keys[MAX_KEYS];
    int n;
};

static entry keys[MAX_KEYS];
static int nkeys;

/* A key is a short identifier: it is written into JSON unescaped. */
static int key_ok(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (!n || n >= KEY_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= '0' && key[i] <= '9') ||
              key[i] == '_'))
            return 0;
    return 1;
}

static int set(const char *key, const char *text, long long num)
{
    if (!key_ok(key))
        return VRAMTAP_EUNKNOWN;
    if (vt_cfg.disabled)
        return VRAMTAP_OK;
    int rc = VRAMTAP_OK;
    vt_lock();
    int i = 0;
    while (i < nkeys && strcmp(keys[i].key, key))
        i++;
    if (i == nkeys && nkeys < MAX_KEYS)
        snprintf(keys[nkeys++].key, KEY_LEN, "%s", key);
    if (i < nkeys) {
        keys[i].is_num = !text;
        keys[i].num = num;
        snprintf(keys[i].text, TEXT_LEN, "%s", text ? text : "");
    } else {
        rc = VRAMTAP_EUNKNOWN;
    }
    vt_unlock();
    return rc;
}

VT_EXPORT int vramtap_record_text(const char *key, const char *value)
{
    return value ? set(key, value, 0) : VRAMTAP_EUNKNOWN;
}

VT_EXPORT int vramtap_record_int(const char *key, long long value)
{
    return set(key, NULL, value);
}

vt_record_frozen *vt_record_freeze_locked(void)
{
    vt_record_frozen *z = malloc(sizeof *z);
    if (z) {
        memcpy(z->keys, keys, (size_t)nkeys * sizeof *keys);
        z->n = nkeys;
    }
    return z;
}

void vt_record_write(FILE *f, const vt_record_frozen *z)
{
    fputs(VT_JSON_KEY(VT_K_RUN_RECORD) "{", f);
    for (int i = 0; z && i < z->n; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : "", z->keys[i].key);
        if (z->keys[i].is_num)
            fprintf(f, "%lld", z->keys[i].num);
        else
            vt_json_str(f, z->keys[i].text);
    }
    fputs("},\n", f);
}
