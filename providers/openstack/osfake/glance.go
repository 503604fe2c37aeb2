package osfake

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

func (c *Cloud) routeGlance(mux *http.ServeMux) {
	mux.HandleFunc("GET /image/{region}/{$}", c.imageVersions)
	mux.HandleFunc("GET /image/{region}/v2/images", c.glance(c.listImages))
	mux.HandleFunc("GET /image/{region}/v2/images/{id}", c.glance(c.showImage))
}

func (c *Cloud) glance(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.authorized(w, r) {
			return
		}
		if !slices.Contains(c.opts.Regions, r.PathValue("region")) {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}
}

// imageVersions is Glance's version document (300, no token needed),
// which clients read to find the v2 API under an unversioned endpoint.
func (c *Cloud) imageVersions(w http.ResponseWriter, r *http.Request) {
	self := c.Server.URL + "/image/" + r.PathValue("region") + "/v2/"
	var versions []any
	for i, id := range []string{"v2.16", "v2.15", "v2.9", "v2.0"} {
		status := "SUPPORTED"
		if i == 0 {
			status = "CURRENT"
		}
		versions = append(versions, map[string]any{"id": id, "status": status, "links": []any{map[string]any{"rel": "self", "href": self}}})
	}
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": versions})
}

// images is Glance's image list now. ReplaceImage swaps the slice, never
// changes it, so the caller may range over it unlocked.
func (c *Cloud) images() []Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts.Images
}

func (c *Cloud) image(ref string) (Image, bool) {
	for _, img := range c.images() {
		if img.ID == ref || strings.HasSuffix(ref, "/images/"+img.ID) {
			return img, true
		}
	}
	return Image{}, false
}

func (c *Cloud) imageView(img Image) map[string]any {
	return map[string]any{
		"id": img.ID, "name": img.Name, "status": img.Status, "visibility": "public", "protected": false, "os_hidden": false,
		"container_format": "bare", "disk_format": "qcow2", "min_disk": 0, "min_ram": 0, "size": 344457216,
		"checksum": "", "tags": []string{}, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
		"self": "/v2/images/" + img.ID, "file": "/v2/images/" + img.ID + "/file", "schema": "/v2/schemas/image",
	}
}

// listImages is GET /v2/images with the name, status and id ("in:")
// filters.
func (c *Cloud) listImages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	images := []any{}
	for _, img := range c.images() {
		if (q.Get("name") != "" && q.Get("name") != img.Name) || (q.Get("status") != "" && q.Get("status") != img.Status) {
			continue
		}
		if id := q.Get("id"); id != "" && !slices.Contains(strings.Split(strings.TrimPrefix(id, "in:"), ","), img.ID) {
			continue
		}
		images = append(images, c.imageView(img))
	}
	writeJSON(w, http.StatusOK, map[string]any{"images": images, "first": "/v2/images", "schema": "/v2/schemas/images"})
}

func (c *Cloud) showImage(w http.ResponseWriter, r *http.Request) {
	img, ok := c.image(r.PathValue("id"))
	if !ok {
		// Glance answers a missing image with webob's plain text page.
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, "404 Not Found\n\nNo image found with ID %s\n\n   ", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, c.imageView(img))
}
