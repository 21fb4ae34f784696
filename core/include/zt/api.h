// Symbol visibility for the zt SDK. Plugins are built with hidden visibility; everything the
// core exports to them (interfaces, their typeinfo, helpers) is marked ZT_API.
#pragma once

#define ZT_API __attribute__((visibility("default")))
