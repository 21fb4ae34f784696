// Symbol visibility for the zt SDK. Plugins are built with hidden visibility; everything the
// core exports to them (interfaces, their typeinfo, helpers) is marked ZT_API. A plugin's own
// classes need no marking: the loader reaches them only through zt_plugin_info_v1 and the
// factory entry that ZT_PLUGIN exports.
// Thread safety: not applicable (a macro).
#pragma once

#define ZT_API __attribute__((visibility("default")))
