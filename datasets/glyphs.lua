-- datasets/glyphs.lua: image OOD test set, notMNIST-like: the letters A-J rendered with FreeType
-- from 20 installed Debian fonts (DejaVu, GNU FreeFont, Liberation), 50 jittered renderings per
-- font and letter = 10,000 images, white on black, fitted to a 20 px box and centred by centre of
-- mass in 28x28 like MNIST. Jitter (seeded, per image): scale 0.8-1.05 of the box, rotation
-- +-12 degrees, shift +-1.5 px, stroke -0.5..+3.5 px at 64 px (FT_Outline_Embolden).
-- Labels -1; /test/orig_labels holds the letter (0 = A), /test/font the font (0-based position
-- in /meta fonts).
local core = require("hydra.core")
local data = require("hydra.data")

local FONTS = {
  { "fonts-dejavu-core", "dejavu/DejaVuSans.ttf", "abdc775b21b1bc470d50c97e790d276f2054b7504e56e5bd3e64f48d68582322" },
  { "fonts-dejavu-core", "dejavu/DejaVuSans-Bold.ttf", "0d977336a6d5fba34eab8e3199eb218327161b5143749f802982c2bc34df0c96" },
  { "fonts-dejavu-core", "dejavu/DejaVuSans-Oblique.ttf", "eef1a593cc0a4654f147fd1aa9a11e7d327eb8be6f3a35099182db6aeb5d28fe" },
  { "fonts-dejavu-core", "dejavu/DejaVuSansCondensed.ttf", "2d8aa290adcf1ebcbb35f63e57cf32941b012eaab4b65096b904112cf3bac972" },
  { "fonts-dejavu-core", "dejavu/DejaVuSansMono.ttf", "0f5db4f1749979d961019838b160bec74abdf7f9eca69553fe1aa856bbff49a4" },
  { "fonts-dejavu-core", "dejavu/DejaVuSerif.ttf", "13e61509f5c81d7c3132810f4f903e3523df89c802bf6e0674621e8f659cdfe1" },
  { "fonts-dejavu-core", "dejavu/DejaVuSerif-Bold.ttf", "e2fd85eba2de65ac270d1cdb1685e252eb827f600850cf62af2d20c41b22e945" },
  { "fonts-dejavu-core", "dejavu/DejaVuSerif-Italic.ttf", "889a2b9daff9f091f7cf1ff6c88e5c1a5b55b3afb221571393ccb71ec9301ec9" },
  { "fonts-freefont-ttf", "freefont/FreeSans.ttf", "0b602f2825b30f9faa772c2ca25b1ce05b6255c9bf02dd8ca088ae51f9f737bb" },
  { "fonts-freefont-ttf", "freefont/FreeSansBold.ttf", "e8b93173d6d8214fb74a068663d3721fdca612bbf3f98973dddb7067b131a0cf" },
  { "fonts-freefont-ttf", "freefont/FreeSerif.ttf", "12ee050384c99c97a6873708a3aebde3d795de8d8ed069b1a0e3274ab3e5be03" },
  { "fonts-freefont-ttf", "freefont/FreeSerifItalic.ttf", "3049ffb26ed8140c13e21d612d78e18ff3dc20123b85d1f7353a1564163a5e9b" },
  { "fonts-freefont-ttf", "freefont/FreeMono.ttf", "1175cc31865a2a1bf011a7711ddab98302343bd679181b360a0e845774c61ecf" },
  { "fonts-freefont-ttf", "freefont/FreeMonoBold.ttf", "30b4b98748839431a366123f859871549b57e461a8b8ec2d3d65b55b2fb9f22d" },
  { "fonts-liberation", "liberation/LiberationSans-Regular.ttf", "f8ace1f892b2bd9dc1792ba7f097fa7588f84fed48321480e04de5390828221f" },
  { "fonts-liberation", "liberation/LiberationSans-Bold.ttf", "361c61b82d575c5c35fd9157fda8b0194bcfcd0d88ea8521a4fb5dd53d33dddc" },
  { "fonts-liberation", "liberation/LiberationSerif-Regular.ttf", "1c9c77c2cd0f3c2d2aeef53ea50a4d5d3d684ac73a431d7c70d7864887d194a3" },
  { "fonts-liberation", "liberation/LiberationSerif-Italic.ttf", "ccd19036f8e8599e920345105df8d21eb27a66b700ac23968fb14d70259ddb1e" },
  { "fonts-liberation", "liberation/LiberationMono-Regular.ttf", "a2e642d350acb1c5e368f375db8a4ef5a2f4ff2b79056d8c3be8bd8a7e9fcb44" },
  { "fonts-liberation", "liberation/LiberationSansNarrow-Regular.ttf", "ab9719545aeb24156c462601f92bf4897130beaac59ad79bea7da264bce69b19" },
}

local inputs = {}
for i, f in ipairs(FONTS) do
  inputs[i] = { name = ("font%02d"):format(i), from = "debian", package = f[1],
                path = "/usr/share/fonts/truetype/" .. f[2], sha256 = f[3],
                source = "Debian package " .. f[1] }
end

return {
  name = "glyphs",
  role = "image-ood",
  kind = "image",
  licence = "generated; fonts: Bitstream Vera/DejaVu licence, GPL-3+ with font exception (FreeFont), OFL-1.1 (Liberation)",
  description = "letters A-J rendered with FreeType from 20 Debian fonts, 50 jittered images per font and letter",
  inputs = inputs,
  seed = 0,
  options = { per = 50 },
  prepare = function(ctx)
    local paths, names = {}, {}
    for i, f in ipairs(FONTS) do
      paths[i] = ctx.input(("font%02d"):format(i))
      names[i] = f[2]
    end
    local images, letter, font = core.glyph_render_set(paths, "ABCDEFGHIJ", ctx.options.per, ctx.seed)
    data.write_image_split(ctx.out, "test", images, data.const_labels(images:size(1), -1))
    ctx.out:write("/test/orig_labels", letter)
    ctx.out:write("/test/font", font)
    ctx.meta("fonts", table.concat(names, ","))
    ctx.meta("jitter", "scale 0.8-1.05 of a 20 px box, rotation +-12 deg, shift +-1.5 px, bold -0.5..3.5 px at 64 px")
  end,
}
