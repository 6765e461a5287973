-- datasets/opencv-digits.lua: image OOD test set: the 5,000 handwritten digits of OpenCV's
-- samples/data/digits.png (a 2000x1000 sheet of 20x20 cells, 100 per row, 500 per digit in
-- order 0..9), padded to 28x28 (4 px of black on each side). Labels -1; the digit is kept in
-- /test/orig_labels. The PNG comes from Debian's opencv-doc, extracted by `make deps`.
local core = require("hydra.core")
local data = require("hydra.data")

return {
  name = "opencv-digits",
  role = "image-ood",
  kind = "image",
  licence = "Apache-2.0 (OpenCV 4.x samples)",
  description = "OpenCV digits.png: 5,000 handwritten digits, 20x20 padded to 28x28",
  inputs = {
    { name = "digits", from = "debian-extract", package = "opencv-doc",
      file = "usr/share/doc/opencv-doc/examples/data/digits.png",
      sha256 = "60c917758ef97cc090f35cd8e293e4de691ef942847da0ff80dedab33d57c662",
      source = "https://github.com/opencv/opencv/blob/4.6.0/samples/data/digits.png" },
  },
  seed = 0,
  prepare = function(ctx)
    local sheet = core.png_read(ctx.input("digits"))
    if sheet:size(1) ~= 1000 or sheet:size(2) ~= 2000 then
      error(("digits.png is %dx%d, expected 1000x2000 (rows x columns)"):format(sheet:size(1), sheet:size(2)))
    end
    local cells = core.img_tiles(sheet, 20, 20)        -- [5000,20,20], row-major over the sheet
    local images = core.img_pad(cells, 4, 4, 4, 4, 0)
    -- 50 sheet rows; digit d fills rows 5d .. 5d+4, i.e. cells 500d .. 500d+499
    local per_digit = {}
    for d = 0, 9 do per_digit[d + 1] = data.const_labels(500, d) end
    local orig = core.concat(per_digit)
    data.write_image_split(ctx.out, "test", images, data.const_labels(5000, -1))
    ctx.out:write("/test/orig_labels", orig)
  end,
}
