// libxml2's SAX2 push parser, for NerdfeedKit's feed reader (XMLStream.swift).
// The include path comes from pkg-config (libxml-2.0): Debian's libxml2-dev,
// which Swift's own Linux install needs, or Homebrew's libxml2.
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU, and its encoding.h then includes the
// system's ICU headers, whose types clash with Foundation's own copy of ICU.
// Nothing here touches the ICU parts of an encoding handler (only pointers
// to one), so they are left out.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>
#include <libxml/entities.h>
