// Everything a user of kiln includes.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/cache.hpp>
#include <kiln/cache_pack.hpp>
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/registry.hpp>
#include <kiln/remote.hpp>
#include <kiln/select.hpp>
