/* CUPTI injection: writes every loaded module whose cubin names an nvjet kernel to $CUBIN_DUMP_DIR. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cupti.h>
static void CUPTIAPI on_res(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *cb)
{
    (void)ud;
    if (d != CUPTI_CB_DOMAIN_RESOURCE || id != CUPTI_CBID_RESOURCE_MODULE_LOADED)
        return;
    const CUpti_ResourceData *rd = cb;
    const CUpti_ModuleResourceData *md = rd->resourceDescriptor;
    if (!md || !md->pCubin || !memmem(md->pCubin, md->cubinSize, "nvjet", 5))
        return;
    const char *dir = getenv("CUBIN_DUMP_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/module_%u.cubin", dir ? dir : "/tmp", md->moduleId);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(md->pCubin, 1, md->cubinSize, f);
        fclose(f);
    }
}
int InitializeInjection(void)
{
    CUpti_SubscriberHandle sub;
    if (cuptiSubscribe(&sub, on_res, NULL) != CUPTI_SUCCESS)
        return 0;
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
    return 1;
}
