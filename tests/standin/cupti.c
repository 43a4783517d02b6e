/* libcupti.so.13 stand-in: the part of CUPTI's callback API vramtap uses, as NVIDIA documents it
 * (cupti_callbacks.h): one subscriber, callbacks enabled per API or for a whole domain (the
 * runtime's and the driver's), and for each enabled call a CUpti_CallbackData at its entry and
 * its exit, holding the call's parameter struct (generated_cuda_meta.h,
 * generated_cuda_runtime_api_meta.h), its correlation id (the same at both sites), a per-call
 * slot of correlation data and, at the exit only, a pointer to its return value. The driver
 * stand-in reports the calls, its own and the runtime's, through standin_trace_register
 * (trace.c). */
#include <cupti.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "trace.h"

#define MAX_CBID                                                                                   \
    ((int)CUPTI_DRIVER_TRACE_CBID_SIZE > (int)CUPTI_RUNTIME_TRACE_CBID_SIZE                        \
         ? (int)CUPTI_DRIVER_TRACE_CBID_SIZE                                                       \
         : (int)CUPTI_RUNTIME_TRACE_CBID_SIZE)

struct CUpti_Subscriber_st {
    CUpti_CallbackFunc callback;
    void *userdata;
    _Atomic bool enabled[2][MAX_CBID]; /* the driver's, the runtime's */
};

/* The callback ids of a domain, and its row of enabled[]; 0 for the domains not reported. */
static uint32_t domain_size(CUpti_CallbackDomain domain)
{
    return domain == CUPTI_CB_DOMAIN_DRIVER_API    ? CUPTI_DRIVER_TRACE_CBID_SIZE
           : domain == CUPTI_CB_DOMAIN_RUNTIME_API ? CUPTI_RUNTIME_TRACE_CBID_SIZE
                                                   : 0;
}

static int row(CUpti_CallbackDomain domain)
{
    return domain == CUPTI_CB_DOMAIN_RUNTIME_API;
}

static struct CUpti_Subscriber_st the_subscriber;
static atomic_bool subscribed;
static atomic_uint next_correlation = 1;

/* The call in progress on this thread in each domain (a runtime call may make driver calls;
 * driver calls do not nest: the driver calls itself without its traced entry points). */
static _Thread_local uint32_t correlation[2];
static _Thread_local uint64_t correlation_data[2];

static CUresult (*ctx_get_current)(CUcontext *);

static void api_hook(int domain, int site, uint32_t cbid, const char *name, const void *params,
                     void *result)
{
    struct CUpti_Subscriber_st *s = &the_subscriber;
    int r = row((CUpti_CallbackDomain)domain);
    if (!atomic_load(&subscribed) || cbid >= domain_size((CUpti_CallbackDomain)domain) ||
        !atomic_load(&s->enabled[r][cbid]))
        return;
    if (site == CUPTI_API_ENTER) {
        correlation[r] = atomic_fetch_add(&next_correlation, 1);
        correlation_data[r] = 0;
    }
    CUcontext ctx = NULL;
    if (ctx_get_current && ctx_get_current(&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    CUpti_CallbackData data = {
        .callbackSite = site == 0 ? CUPTI_API_ENTER : CUPTI_API_EXIT,
        .functionName = name,
        .functionParams = params,
        .functionReturnValue = site == 0 ? NULL : result,
        .symbolName = NULL,
        .context = ctx,
        .contextUid = ctx ? 1 : 0,
        .correlationData = &correlation_data[r],
        .correlationId = correlation[r],
    };
    s->callback(s->userdata, (CUpti_CallbackDomain)domain, cbid, &data);
}

CUptiResult cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS:
        *str = "CUPTI_SUCCESS";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_INVALID_PARAMETER:
        *str = "CUPTI_ERROR_INVALID_PARAMETER";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_NOT_INITIALIZED:
        *str = "CUPTI_ERROR_NOT_INITIALIZED";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_NOT_SUPPORTED";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        return CUPTI_SUCCESS;
    default:
        *str = "CUPTI_ERROR_UNKNOWN";
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
}

/* CUPTI attaches to the driver loaded in the process; without one it cannot start. */
static bool attach_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void (*reg)(standin_api_hook) =
        h ? (void (*)(standin_api_hook))dlsym(h, "standin_trace_register") : NULL;
    if (!reg)
        return false;
    ctx_get_current = (CUresult(*)(CUcontext *))dlsym(h, "cuCtxGetCurrent");
    reg(api_hook);
    return true;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                           void *userdata)
{
    if (!subscriber || !callback)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (atomic_load(&subscribed))
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    if (!attach_driver())
        return CUPTI_ERROR_NOT_INITIALIZED;
    struct CUpti_Subscriber_st *s = &the_subscriber;
    s->callback = callback;
    s->userdata = userdata;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < MAX_CBID; i++)
            atomic_store(&s->enabled[r][i], false);
    atomic_store(&subscribed, true);
    *subscriber = s;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    if (subscriber != &the_subscriber || !atomic_load(&subscribed))
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&subscribed, false);
    return CUPTI_SUCCESS;
}

/* Only the driver's and the runtime's domains are reported by the stand-in: other domains are
 * refused rather than accepted and left silent. */
static CUptiResult check(CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain)
{
    if (subscriber != &the_subscriber || !atomic_load(&subscribed))
        return CUPTI_ERROR_INVALID_PARAMETER;
    return domain_size(domain) ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_SUPPORTED;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    CUptiResult r = check(subscriber, domain);
    if (r == CUPTI_SUCCESS && (cbid == 0 || cbid >= domain_size(domain)))
        r = CUPTI_ERROR_INVALID_PARAMETER;
    if (r == CUPTI_SUCCESS)
        atomic_store(&subscriber->enabled[row(domain)][cbid], enable != 0);
    return r;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                              CUpti_CallbackDomain domain)
{
    CUptiResult r = check(subscriber, domain);
    for (uint32_t i = 1; r == CUPTI_SUCCESS && i < domain_size(domain); i++)
        atomic_store(&subscriber->enabled[row(domain)][i], enable != 0);
    return r;
}
