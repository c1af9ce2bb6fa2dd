/* Access to the coll framework's component list, whose walking and editing
 * are macros and static inline functions of opal_list.h. The policy (which
 * components, when, what to report) is in coll-rdma's glue. */
#include "ompi_config.h"
#include <string.h>
#include "opal/class/opal_list.h"
#include "opal/mca/base/base.h"
#include "opal/mca/base/mca_base_component_repository.h"
#include "ompi/mca/coll/base/base.h"
#include "shim.h"

static mca_base_framework_t *coll_framework(void)
{
    return &ompi_coll_base_framework;
}

const char *coll_rdma_shim_coll_selection(void)
{
    return coll_framework()->framework_selection;
}

void coll_rdma_shim_coll_each_installed(void (*visit)(void *context, const char *name), void *context)
{
    mca_base_framework_t *framework = coll_framework();
    const mca_base_component_t **linked = framework->framework_static_components;
    for (size_t i = 0; NULL != linked && NULL != linked[i]; ++i) {
        visit(context, linked[i]->mca_component_name);
    }
    opal_list_t *found = NULL;
    if (OPAL_SUCCESS == mca_base_component_repository_get_components(framework, &found) && NULL != found) {
        mca_base_component_repository_item_t *item;
        OPAL_LIST_FOREACH(item, found, mca_base_component_repository_item_t) {
            visit(context, item->ri_name);
        }
    }
}

void coll_rdma_shim_coll_each_listed(void (*visit)(void *context, const char *name), void *context)
{
    mca_base_component_list_item_t *entry;
    OPAL_LIST_FOREACH(entry, &coll_framework()->framework_components, mca_base_component_list_item_t) {
        visit(context, entry->cli_component->mca_component_name);
    }
}

static mca_base_component_list_item_t *entry_of(const mca_base_component_t *component)
{
    mca_base_component_list_item_t *entry;
    OPAL_LIST_FOREACH(entry, &coll_framework()->framework_components, mca_base_component_list_item_t) {
        if (entry->cli_component == component) {
            return entry;
        }
    }
    return NULL;
}

/* Appends a list entry for `name` to the framework's list, as Open MPI's
 * own component search does; 0 if no component of that name loads. */
static int append_entry(const char *name)
{
    mca_base_framework_t *framework = coll_framework();
    const mca_base_component_t **linked = framework->framework_static_components;
    for (size_t i = 0; NULL != linked && NULL != linked[i]; ++i) {
        if (0 == strcmp(linked[i]->mca_component_name, name)) {
            mca_base_component_list_item_t *entry = OBJ_NEW(mca_base_component_list_item_t);
            if (NULL == entry) {
                return 0;
            }
            entry->cli_component = linked[i];
            opal_list_append(&framework->framework_components, &entry->super);
            return 1;
        }
    }
    opal_list_t *found = NULL;
    if (OPAL_SUCCESS != mca_base_component_repository_get_components(framework, &found) || NULL == found) {
        return 0;
    }
    mca_base_component_repository_item_t *item;
    OPAL_LIST_FOREACH(item, found, mca_base_component_repository_item_t) {
        if (0 == strcmp(item->ri_name, name)) {
            return OPAL_SUCCESS == mca_base_component_repository_open(framework, item);
        }
    }
    return 0;
}

const mca_base_component_t *coll_rdma_shim_coll_load_before(const char *name,
                                                            const mca_base_component_t *anchor)
{
    opal_list_t *list = &coll_framework()->framework_components;
    if (!append_entry(name)) {
        return NULL;
    }
    mca_base_component_list_item_t *entry = (mca_base_component_list_item_t *) opal_list_get_last(list);
    mca_base_component_list_item_t *anchor_entry = entry_of(anchor);
    if (NULL != anchor_entry) {
        opal_list_remove_item(list, &entry->super);
        opal_list_insert_pos(list, &anchor_entry->super, &entry->super);
    }
    return entry->cli_component;
}

void coll_rdma_shim_coll_unload(const mca_base_component_t *component, int opened)
{
    mca_base_framework_t *framework = coll_framework();
    mca_base_component_list_item_t *entry = entry_of(component);
    if (NULL != entry) {
        opal_list_remove_item(&framework->framework_components, &entry->super);
        OBJ_RELEASE(entry);
    }
    if (opened) {
        mca_base_component_close(component, framework->framework_output);
    } else {
        mca_base_component_unload(component, framework->framework_output);
    }
}
