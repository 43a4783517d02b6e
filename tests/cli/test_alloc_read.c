/* The fast reader of allocation elements (src/cli/read/alloc_read.c) against the tree reader of
 * load.c: every element the fast reader takes, the tree reader takes with the same figures, and
 * every element the tree reader refuses, the fast reader leaves to it. The tree reader is made
 * to read an element by a member with an escape in it, which the fast reader never takes. */
#include <unistd.h>

#include "alloc_read.h"
#include "check.h"

static const char *const head =
    "{\"format\": \"vramtap-snapshot\", \"version\": 1, \"kind\": \"exit\", \"phase_markers\": "
    "true, \"steps\": 5, \"devices\": [";
static const char *const device =
    "{\"device\": %d, \"peak_bytes\": 0, \"peak_time_s\": 1.0, \"peak_phase\": \"forward\", "
    "\"peak_step\": 1}";
static const char *const tail =
    "], \"sites\": [{\"id\": 0, \"signature\": \"a\", \"frames\": []}, {\"id\": 1, \"signature\": "
    "\"b\", \"frames\": []}, {\"id\": 2, \"signature\": \"c\", \"frames\": []}], \"oom_events\": "
    "[], \"module_paths\": [\"enc\", \"enc.layers.0\"]}";

/* Loads a snapshot of devices 0 and 1 with the one allocation `elem`; escaped: with a member
 * "x": "\u0041" put first, so that the tree reader reads it. */
static int load(const char *elem, bool escaped, vt_snapshot *s, vt_err *err)
{
    char path[] = "/tmp/vt_alloc_readXXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f)
        return -2;
    fputs(head, f);
    fprintf(f, device, 0);
    fputs(", ", f);
    fprintf(f, device, 1);
    fputs("], \"allocations\": [", f);
    if (escaped && elem[0] == '{')
        fprintf(f, "{\"x\": \"\\u0041\", %s", elem + 1);
    else
        fputs(elem, f);
    fputs(tail, f);
    fclose(f);
    int r = vt_snapshot_load(path, s, err);
    unlink(path);
    return r;
}

static void check_same(const vt_alloc *a, const vt_alloc *b, const char *elem)
{
    if (!vt_alloc_same(a, b)) {
        fprintf(stderr, "the readers differ on %s\n", elem);
        check_failures++;
    }
}

/* Reads elem with both readers; returns whether the fast one took it, with its figures in *out
 * (labelled freed). A refusal by the tree reader must be a decline by the fast one. */
static bool both(const char *elem, bool tree_takes, vt_alloc *out)
{
    vt_snapshot tree, mixed;
    vt_err err, err2;
    int16_t index[VT_MAX_DEVICE + 1];
    memset(index, 0xff, sizeof index);
    index[0] = 0;
    index[1] = 1;
    vt_alloc_limits lim = {5, 3, 2, index};
    vt_alloc fast;
    memset(&fast, 0, sizeof fast);
    bool took = vt_alloc_sax(&lim, elem, strlen(elem), &fast);
    int rt = load(elem, true, &tree, &err), rm = load(elem, false, &mixed, &err2);
    if ((rt == 0) != tree_takes || rm != rt) {
        fprintf(stderr, "%s: tree reader %s, as read %s (%s)\n", elem, rt ? "refused" : "took",
                rm ? "refused" : "taken",
                rt   ? err.msg
                : rm ? err2.msg
                     : "");
        check_failures++;
    }
    if (took && rt) {
        fprintf(stderr, "the fast reader took what the tree reader refuses: %s\n", elem);
        check_failures++;
    }
    if (took && rt == 0)
        check_same(&fast, &tree.allocs[0], elem);
    if (rt == 0 && rm == 0)
        check_same(&mixed.allocs[0], &tree.allocs[0], elem);
    if (rt == 0)
        vt_snapshot_free(&tree);
    if (rm == 0)
        vt_snapshot_free(&mixed);
    *out = fast;
    if (took && fast.labelled) {
        static int64_t kept[VT_NLABELLED];
        memcpy(kept, fast.labelled, sizeof kept);
        free(fast.labelled);
        out->labelled = kept;
    }
    return took;
}

#define ALLOC                                                                                      \
    "\"id\": 7, \"device\": 1, \"size\": 1000, \"address\": \"0x10\", \"api\": \"cudaMalloc\""
#define BIRTH "\"birth\": {\"phase\": \"forward\", \"step\": 2, \"instance\": 4}"

int main(void)
{
    vt_alloc a;
    /* taken, with every figure */
    CHECK(both("{" ALLOC ", \"kind\": \"pool\", \"birth_time_s\": 1.5, \"death_time_s\": null, "
               "\"birth_seq\": 3, \"death_seq\": null, " BIRTH ", \"death\": null, \"site\": 2}",
               true, &a));
    CHECK_EQ_INT(a.id, 7);
    CHECK_EQ_INT(a.device, 1);
    CHECK_EQ_INT(a.size, 1000);
    CHECK_EQ_INT(a.kind, VT_KIND_POOL);
    CHECK_EQ_INT(a.birth_seq, 3);
    CHECK_EQ_INT(a.death_seq, -1);
    CHECK_EQ_INT(a.birth.phase, VT_FORWARD);
    CHECK_EQ_INT(a.birth.step, 2);
    CHECK_EQ_INT(a.birth.instance, 4);
    CHECK(a.alive_at_end);
    CHECK_EQ_INT(a.site, 2);
    CHECK_EQ_INT(a.mpath, -1);
    CHECK(!a.labelled && !a.birth_from_stack && !a.before_window && !a.recomputed);
    /* an nn.Module path, recomputed */
    CHECK(both("{" ALLOC ", \"kind\": \"pool\", " BIRTH
               ", \"module_path\": 1, \"recomputed\": true}",
               true, &a));
    CHECK_EQ_INT(a.mpath, 1);
    CHECK(a.recomputed);
    /* dead, labels overlapping (each byte once) and of a category this reader does not know */
    CHECK(both("{" ALLOC ", \"kind\": \"device\", \"birth_seq\": 3, \"death_seq\": 9, " BIRTH
               ", \"death\": {\"phase\": \"backward\", \"step\": 3, \"instance\": 5}, \"site\": 0, "
               "\"birth_phase_from\": \"allocation_stack\", \"before_window\": true, "
               "\"labels\": [{\"offset\": 50, "
               "\"bytes\": 100, \"category\": \"temporary\"}, {\"offset\": 0, \"bytes\": 100, "
               "\"category\": \"activations\"}, {\"offset\": 900, \"bytes\": 100, \"category\": "
               "\"mystery\"}, {\"offset\": 600, \"bytes\": 300, \"category\": \"parameters\"}]}",
               true, &a));
    CHECK(!a.alive_at_end && a.birth_from_stack && a.before_window);
    CHECK_EQ_INT(a.death.phase, VT_BACKWARD);
    CHECK_EQ_INT(a.death.step, 3);
    CHECK_EQ_INT(a.death.instance, 5);
    CHECK_EQ_INT(a.death_seq, 9);
    CHECK(a.labelled);
    CHECK_EQ_INT(a.labelled[VT_CAT_ACTIVATIONS], 100);
    CHECK_EQ_INT(a.labelled[VT_CAT_TEMPORARY], 50);
    CHECK_EQ_INT(a.labelled[VT_CAT_PARAMETERS], 300);
    CHECK_EQ_INT(a.labelled[VT_CAT_GRADIENTS], 0);
    /* the least an element may say: unknowns are -1; an unknown kind; an empty label list */
    CHECK(both("{\"size\": 1, \"device\": 0, \"kind\": \"future\", \"labels\": [], "
               "\"before_window\": false, \"birth\": "
               "{\"phase\": \"setup\", \"step\": 0, \"instance\": 0}}",
               true, &a));
    CHECK_EQ_INT(a.id, -1);
    CHECK_EQ_INT(a.birth_seq, -1);
    CHECK_EQ_INT(a.site, -1);
    CHECK_EQ_INT(a.kind, VT_KIND_OTHER);
    CHECK(!a.labelled);
    /* left to the tree reader, which takes them */
    CHECK(!both("{" ALLOC ", \"kind\": \"pool\", \"note\": \"caf\\u00e9\", " BIRTH "}", true, &a));
    CHECK(!both("{" ALLOC ", \"kind\": \"pool\", \"note\": \"caf\xc3\xa9\", " BIRTH "}", true, &a));
    CHECK(!both("{" ALLOC ", \"kind\": \"pool\", \"extra\": {\"a\": [1]}, " BIRTH "}", true, &a));
    CHECK(!both("{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"labels\": [{\"offset\": 0, "
                "\"bytes\": 1, \"category\": \"gradients\", \"by\": \"hook\"}]}",
                true, &a));
    CHECK(!both("{" ALLOC ", \"kind\": \"pool\", \"birth\": {\"phase\": \"forward\", \"step\": 2, "
                "\"instance\": 4, \"t\": 1}}",
                true, &a));
    /* refused by both */
    static const char *const bad[] = {
        "5",
        "[]",
        "{" ALLOC ", \"kind\": \"pool\", \"size\": 1000, " BIRTH "}", /* a key twice */
        "{" ALLOC ", \"kind\": \"pool\", \"api\": \"x\", " BIRTH "}", /* an unused key twice */
        "{\"id\": 7, \"device\": 1, \"size\": 1000.0, \"kind\": \"pool\", " BIRTH "}",
        "{\"id\": 7, \"device\": 1, \"size\": -1, \"kind\": \"pool\", " BIRTH "}",
        "{\"id\": 7, \"device\": 1, \"size\": 1125899906842625, \"kind\": \"pool\", " BIRTH "}",
        "{\"id\": 7, \"device\": 1, \"size\": null, \"kind\": \"pool\", " BIRTH "}",
        "{\"id\": 7, \"device\": 2, \"size\": 1, \"kind\": \"pool\", " BIRTH "}",
        "{\"id\": -1, \"device\": 1, \"size\": 1, \"kind\": \"pool\", " BIRTH "}",
        "{\"id\": \"7\", \"device\": 1, \"size\": 1, \"kind\": \"pool\", " BIRTH "}",
        "{" ALLOC ", \"kind\": null, " BIRTH "}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"site\": 3}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"site\": -1}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"module_path\": 2}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"module_path\": \"enc\"}",
        "{" ALLOC ", \"kind\": \"pool\"}",
        "{" ALLOC ", \"kind\": \"pool\", \"birth\": null}",
        "{" ALLOC ", \"kind\": \"pool\", \"birth\": {\"phase\": \"sideways\", \"step\": 2, "
        "\"instance\": 4}}",
        "{" ALLOC ", \"kind\": \"pool\", \"birth\": {\"phase\": \"forward\", \"step\": 6, "
        "\"instance\": 4}}",
        "{" ALLOC ", \"kind\": \"pool\", \"birth\": {\"phase\": \"forward\", \"step\": 2}}",
        "{" ALLOC ", \"kind\": \"pool\", \"birth\": {\"phase\": \"forward\", \"step\": 2, "
        "\"step\": 2, \"instance\": 4}}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"death\": 5}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"death\": {\"phase\": \"forward\", \"step\": "
        "1, \"instance\": 9}}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"labels\": {}}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"labels\": [5]}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"labels\": [{\"offset\": 900, \"bytes\": "
        "101, \"category\": \"mystery\"}]}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"labels\": [{\"offset\": 0, \"bytes\": 1}]}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"x\": 99999999999999999999}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"x\": 1e999}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"x\": 01}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"x\": \"a\x01\"}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"x\": \"\xff\"}",
        "{" ALLOC ", \"kind\": \"pool\", " BIRTH ", \"x\": [}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(!both(bad[i], false, &a));
    return CHECK_DONE();
}
