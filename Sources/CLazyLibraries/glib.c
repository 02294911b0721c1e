// GLib, loaded on first use: `--version`, `which` and the commands without a config file never
// load it (with PCRE2, which it links, about 0.23 ms of every start).
#include "CLazyLibraries.h"
#include "lanyard_lazy.h"

#include <glib.h>

#define GLIB_FUNCTIONS(F, P)                                                                                          \
    P(void, g_error_free, (GError * error), (error))                                                                  \
    F(gboolean, g_file_set_contents_full,                                                                             \
      (const gchar *filename, const gchar *contents, gssize length, GFileSetContentsFlags flags, int mode,             \
       GError **error),                                                                                               \
      (filename, contents, length, flags, mode, error))                                                               \
    P(void, g_free, (gpointer mem), (mem))                                                                            \
    F(const gchar *, g_get_user_runtime_dir, (void), ())                                                              \
    F(gboolean, g_hash_table_insert, (GHashTable * hash_table, gpointer key, gpointer value), (hash_table, key, value)) \
    P(void, g_hash_table_iter_init, (GHashTableIter * iter, GHashTable *hash_table), (iter, hash_table))              \
    F(gboolean, g_hash_table_iter_next, (GHashTableIter * iter, gpointer *key, gpointer *value), (iter, key, value))  \
    F(GHashTable *, g_hash_table_new_full,                                                                            \
      (GHashFunc hash_func, GEqualFunc key_equal_func, GDestroyNotify key_destroy_func,                               \
       GDestroyNotify value_destroy_func),                                                                            \
      (hash_func, key_equal_func, key_destroy_func, value_destroy_func))                                              \
    P(void, g_hash_table_unref, (GHashTable * hash_table), (hash_table))                                              \
    P(void, g_key_file_free, (GKeyFile * key_file), (key_file))                                                       \
    F(gchar **, g_key_file_get_groups, (GKeyFile * key_file, gsize *length), (key_file, length))                      \
    F(gchar **, g_key_file_get_keys, (GKeyFile * key_file, const gchar *group_name, gsize *length, GError **error),   \
      (key_file, group_name, length, error))                                                                          \
    F(gchar *, g_key_file_get_string,                                                                                 \
      (GKeyFile * key_file, const gchar *group_name, const gchar *key, GError **error),                               \
      (key_file, group_name, key, error))                                                                             \
    F(gboolean, g_key_file_load_from_data,                                                                            \
      (GKeyFile * key_file, const gchar *data, gsize length, GKeyFileFlags flags, GError **error),                    \
      (key_file, data, length, flags, error))                                                                         \
    F(GKeyFile *, g_key_file_new, (void), ())                                                                         \
    P(void, g_list_free, (GList * list), (list))                                                                      \
    P(void, g_main_context_invoke, (GMainContext * context, GSourceFunc function, gpointer data), (context, function, data)) \
    P(void, g_main_context_invoke_full,                                                                               \
      (GMainContext * context, gint priority, GSourceFunc function, gpointer data, GDestroyNotify notify),            \
      (context, priority, function, data, notify))                                                                    \
    F(GMainContext *, g_main_context_new, (void), ())                                                                 \
    P(void, g_main_context_pop_thread_default, (GMainContext * context), (context))                                   \
    P(void, g_main_context_push_thread_default, (GMainContext * context), (context))                                  \
    P(void, g_main_context_unref, (GMainContext * context), (context))                                                \
    F(GMainLoop *, g_main_loop_new, (GMainContext * context, gboolean is_running), (context, is_running))             \
    P(void, g_main_loop_quit, (GMainLoop * loop), (loop))                                                             \
    P(void, g_main_loop_run, (GMainLoop * loop), (loop))                                                              \
    P(void, g_main_loop_unref, (GMainLoop * loop), (loop))                                                            \
    F(gpointer, g_malloc0, (gsize n_bytes), (n_bytes))                                                                \
    F(const gchar *, g_quark_to_string, (GQuark quark), (quark))                                                      \
    F(guint, g_source_attach, (GSource * source, GMainContext *context), (source, context))                          \
    P(void, g_source_set_callback, (GSource * source, GSourceFunc func, gpointer data, GDestroyNotify notify),       \
      (source, func, data, notify))                                                                                   \
    P(void, g_source_unref, (GSource * source), (source))                                                             \
    F(gchar *, g_strdup, (const gchar *str), (str))                                                                   \
    F(gboolean, g_str_equal, (gconstpointer v1, gconstpointer v2), (v1, v2))                                          \
    F(guint, g_str_hash, (gconstpointer v), (v))                                                                      \
    P(void, g_strfreev, (gchar * *str_array), (str_array))                                                            \
    P(void, g_variant_builder_add_value, (GVariantBuilder * builder, GVariant *value), (builder, value))             \
    F(GVariant *, g_variant_builder_end, (GVariantBuilder * builder), (builder))                                      \
    P(void, g_variant_builder_init, (GVariantBuilder * builder, const GVariantType *type), (builder, type))           \
    F(GSource *, g_timeout_source_new, (guint interval), (interval))                                                 \
    F(gboolean, g_variant_get_boolean, (GVariant * value), (value))                                                   \
    F(GVariant *, g_variant_get_child_value, (GVariant * value, gsize index_), (value, index_))                       \
    F(gint32, g_variant_get_int32, (GVariant * value), (value))                                                       \
    F(const gchar *, g_variant_get_string, (GVariant * value, gsize *length), (value, length))                        \
    F(const gchar *, g_variant_get_type_string, (GVariant * value), (value))                                          \
    F(guint32, g_variant_get_uint32, (GVariant * value), (value))                                                     \
    F(GVariant *, g_variant_get_variant, (GVariant * value), (value))                                                 \
    F(GVariant *, g_variant_lookup_value, (GVariant * dictionary, const gchar *key, const GVariantType *expected_type), \
      (dictionary, key, expected_type))                                                                               \
    F(gsize, g_variant_n_children, (GVariant * value), (value))                                                       \
    F(GVariant *, g_variant_new_array, (const GVariantType *child_type, GVariant *const *children, gsize n_children), \
      (child_type, children, n_children))                                                                             \
    F(GVariant *, g_variant_new_boolean, (gboolean value), (value))                                                   \
    F(GVariant *, g_variant_new_byte, (guint8 value), (value))                                                        \
    F(GVariant *, g_variant_new_dict_entry, (GVariant * key, GVariant *value), (key, value))                          \
    F(GVariant *, g_variant_new_fixed_array,                                                                          \
      (const GVariantType *element_type, gconstpointer elements, gsize n_elements, gsize element_size),                \
      (element_type, elements, n_elements, element_size))                                                             \
    F(GVariant *, g_variant_new_int32, (gint32 value), (value))                                                       \
    F(GVariant *, g_variant_new_object_path, (const gchar *object_path), (object_path))                               \
    F(GVariant *, g_variant_new_string, (const gchar *string), (string))                                              \
    F(GVariant *, g_variant_new_strv, (const gchar *const *strv, gssize length), (strv, length))                      \
    F(GVariant *, g_variant_new_tuple, (GVariant * const *children, gsize n_children), (children, n_children))        \
    F(GVariant *, g_variant_new_uint32, (guint32 value), (value))                                                     \
    F(GVariant *, g_variant_new_variant, (GVariant * value), (value))                                                 \
    F(GVariant *, g_variant_ref, (GVariant * value), (value))                                                         \
    F(GVariant *, g_variant_ref_sink, (GVariant * value), (value))                                                    \
    P(void, g_variant_type_free, (GVariantType * type), (type))                                                       \
    F(GVariantType *, g_variant_type_new, (const gchar *type_string), (type_string))                                  \
    P(void, g_variant_unref, (GVariant * value), (value))

LAZY_LIBRARY(glib, "libglib-2.0.so.0", GLIB_FUNCTIONS)
#define LAZY_REQUIRE glib_require
GLIB_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)
